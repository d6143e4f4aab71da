package main

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Every job command takes -n, before or after its argument. Nothing listens at the URL, so
// a command that took its flags answers exit 3 (unreachable), not 2 (usage).
func TestEveryJobCommandTakesN(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "jobs.yaml")
	require.NoError(t, os.WriteFile(file, []byte("jobs:\n- name: a\n  schedule: \"0 2 * * *\"\n  http: {url: \"https://example.com/x\"}\n"), 0o600))
	env := []string{"SCHEDULER_URL=http://127.0.0.1:1"}
	for _, args := range [][]string{
		{"run", "12", "-n", "billing"}, {"cancel", "12", "-n", "billing"}, {"rerun", "12", "-n", "billing"},
		{"runs", "nightly", "-n", "billing"}, {"job", "nightly", "-n", "billing"}, {"trigger", "nightly", "-n", "billing"},
		{"pause", "nightly", "-n", "billing"}, {"resume", "-n", "billing", "nightly"}, {"get", "nightly", "-n", "billing"},
		{"delete", "nightly", "-n", "billing"}, {"apply", "-f", file, "-n", "billing"},
		{"backfill", "nightly", "-n", "billing", "--since", "2026-11-24T00:00:00Z"},
		{"slots", "nightly", "-n", "billing"}, {"notifications", "nightly", "-n", "billing"}, {"jobs", "-n", "billing"},
	} {
		code, _, stderr := runCLI(t, env, args...)
		assert.Equal(t, exitRefused, code, "%v: %s", args, stderr)
		assert.NotContains(t, stderr, "flag provided but not defined", args)
	}
}

// fakeAPI answers whoami with grants, and records every other request's path.
type fakeAPI struct {
	mu    sync.Mutex
	paths []string
}

func (f *fakeAPI) seen() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return strings.Join(f.paths, "\n")
}

func startFakeAPI(t *testing.T, whoami string, other func(w http.ResponseWriter, r *http.Request) bool) (*fakeAPI, string) {
	f := &fakeAPI{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		f.paths = append(f.paths, r.Method+" "+r.URL.Path)
		f.mu.Unlock()
		if r.URL.Path == "/v1/whoami" {
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(whoami))
			return
		}
		if other != nil && other(w, r) {
			return
		}
		w.Header().Set("Content-Type", "application/problem+json")
		w.WriteHeader(http.StatusNotFound)
		_ = json.NewEncoder(w).Encode(map[string]any{"type": "https://scheduler.dev/problems/job-not-found", "title": "Not Found", "status": 404, "detail": "no such job"})
	}))
	t.Cleanup(srv.Close)
	return f, srv.URL
}

// A token that reads one namespace only implies it: trigger acts in teama without -n.
func TestTokenOfOneNamespaceImpliesIt(t *testing.T) {
	t.Parallel()
	api, u := startFakeAPI(t, `{"admin":false,"kind":"token","token_id":"t1","token_name":"ci","grants":[{"namespace":"teama","role":"editor"}]}`, nil)
	_, _, stderr := runCLI(t, []string{"SCHEDULER_URL=" + u, "SCHEDULER_API_TOKEN=x"}, "trigger", "nightly")
	assert.Contains(t, api.seen(), "/v1/namespaces/teama/jobs/nightly", stderr)
	assert.NotContains(t, api.seen(), "POST /v1/jobs/", stderr)

	// -n, or SCHEDULER_NAMESPACE, still decides; whoami is not asked.
	api, u = startFakeAPI(t, `{"admin":false,"kind":"token","grants":[{"namespace":"teama","role":"editor"}]}`, nil)
	runCLI(t, []string{"SCHEDULER_URL=" + u, "SCHEDULER_NAMESPACE=teamb"}, "trigger", "nightly")
	assert.Contains(t, api.seen(), "/v1/namespaces/teamb/jobs/nightly")
	assert.NotContains(t, api.seen(), "/v1/whoami")

	// A token of two namespaces (or an admin) keeps namespace default.
	api, u = startFakeAPI(t, `{"admin":false,"kind":"token","grants":[{"namespace":"teama","role":"editor"},{"namespace":"teamb","role":"viewer"}]}`, nil)
	runCLI(t, []string{"SCHEDULER_URL=" + u}, "trigger", "nightly")
	assert.Contains(t, api.seen(), "/v1/jobs/nightly")
}

// token list names who made a token in words, also on a replica without a token.
func TestTokenListSaysWhoCreatedIt(t *testing.T) {
	t.Parallel()
	_, u := startFakeAPI(t, `{}`, func(w http.ResponseWriter, r *http.Request) bool {
		if r.URL.Path != "/v1/tokens" {
			return false
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"tokens":[{"id":"tok1","name":"ci","role":"editor","namespace":"teama","created_at":"2026-11-01T00:00:00Z","created_by":"none"},
			{"id":"tok2","name":"deploy","role":"admin","created_at":"2026-11-01T00:00:00Z","created_by":"full"}]}`))
		return true
	})
	code, out, stderr := runCLI(t, []string{"SCHEDULER_URL=" + u}, "token", "list")
	require.Equal(t, exitOK, code, stderr)
	assert.NotContains(t, out, " none")
	assert.Contains(t, out, "local admin (no token)")
	assert.Contains(t, out, "SCHEDULER_API_TOKEN")
}

// slots and notifications read their routes and print tables, or the API's JSON.
func TestSlotsAndNotificationsCommands(t *testing.T) {
	t.Parallel()
	api, u := startFakeAPI(t, `{"admin":true}`, func(w http.ResponseWriter, r *http.Request) bool {
		w.Header().Set("Content-Type", "application/json")
		switch r.URL.Path {
		case "/v1/namespaces/billing/jobs/nightly/slots":
			_, _ = w.Write([]byte(`{"job":"nightly","namespace":"billing","since":"2026-11-24T00:00:00Z","until":"2026-11-25T00:00:00Z",
				"slots":[{"scheduled_at":"2026-11-24T02:00:00Z","outcome":"succeeded","run_id":7,"reason":null,"runs":1},
				{"scheduled_at":"2026-11-24T03:00:00Z","outcome":"missed","run_id":null,"reason":"no replica was up","runs":0}],
				"counts":{"succeeded":1,"missed":1}}`))
		case "/v1/namespaces/billing/jobs/nightly/notifications":
			_, _ = w.Write([]byte(`{"job":"nightly","namespace":"billing","waiting":[],"notifications":[{"id":3,"event":"failed","type":"job.failed",
				"kind":"webhook","destination":"https://example.com/alerts","runs":[7],"count":1,"status":"sent","attempts":1,
				"created_at":"2026-11-24T02:01:00Z","sent_at":"2026-11-24T02:01:01Z"}]}`))
		case "/v1/namespaces/billing/jobs/nightly":
			_, _ = w.Write([]byte(`{"name":"nightly","definition":{"name":"nightly","notify":[{"on":["failed","timed_out"],"webhook":{"url":"https://example.com/alerts","signing_secret":"ALERTS_KEY"}}]}}`))
		default:
			return false
		}
		return true
	})
	env := []string{"SCHEDULER_URL=" + u}
	code, out, stderr := runCLI(t, env, "slots", "nightly", "-n", "billing", "--since", "2026-11-24T00:00:00Z")
	require.Equal(t, exitOK, code, stderr)
	assert.Contains(t, api.seen(), "GET /v1/namespaces/billing/jobs/nightly/slots")
	assert.Regexp(t, `SLOT\s+OUTCOME\s+RUN\s+RUNS\s+REASON`, out)
	assert.Contains(t, out, "no replica was up")
	assert.Contains(t, out, "2 slot(s): 1 missed, 1 succeeded")
	code, out, _ = runCLI(t, env, "slots", "nightly", "-n", "billing", "-o", "json")
	require.Equal(t, exitOK, code)
	assert.Contains(t, out, `"outcome": "missed"`)

	code, out, stderr = runCLI(t, env, "notifications", "nightly", "-n", "billing")
	require.Equal(t, exitOK, code, stderr)
	assert.Contains(t, out, "on failed, timed_out: webhook https://example.com/alerts (signed with secret ALERTS_KEY)")
	assert.Regexp(t, `3\s+failed\s+https://example.com/alerts\s+sent\s+1\s+7`, out)
	code, out, _ = runCLI(t, env, "notifications", "nightly", "-n", "billing", "-o", "json")
	require.Equal(t, exitOK, code)
	assert.Contains(t, out, `"destination": "https://example.com/alerts"`)
}

// status shows when each replica was last seen, and marks one not seen for a while as gone
// (a killed replica's row stays until the leader forgets it).
func TestStatusMarksAReplicaNotSeenAsGone(t *testing.T) {
	t.Parallel()
	now := time.Now().UTC()
	ts := func(ago time.Duration) string { return now.Add(-ago).Format(time.RFC3339Nano) }
	_, u := startFakeAPI(t, `{}`, func(w http.ResponseWriter, r *http.Request) bool {
		w.Header().Set("Content-Type", "application/json")
		switch r.URL.Path {
		case "/v1/leader":
			_, _ = w.Write([]byte(`{"instance_id":"r1","epoch":3,"since":"` + ts(time.Hour) + `"}`))
		case "/v1/instances":
			_, _ = w.Write([]byte(`{"instances":[
				{"instance_id":"r1","host":"a","version":"v1","http_addr":":8080","started_at":"` + ts(time.Hour) + `","last_seen_at":"` + ts(time.Second) + `","is_leader":true},
				{"instance_id":"r2","host":"b","version":"v1","http_addr":":8080","started_at":"` + ts(time.Hour) + `","last_seen_at":"` + ts(2*time.Second) + `","is_leader":false},
				{"instance_id":"r3","host":"c","version":"v1","http_addr":":8080","started_at":"` + ts(time.Hour) + `","last_seen_at":"` + ts(15*time.Second) + `","is_leader":false}]}`))
		default:
			return false
		}
		return true
	})
	code, out, stderr := runCLI(t, []string{"SCHEDULER_URL=" + u}, "status")
	require.Equal(t, exitOK, code, stderr)
	assert.Regexp(t, `INSTANCE\s+STATE\s+HOST\s+VERSION\s+ADDRESS\s+LAST SEEN`, out)
	assert.Regexp(t, `(?m)^r1\s+leader\s`, out)
	assert.Regexp(t, `(?m)^r2\s+follower\s`, out)
	assert.Regexp(t, `(?m)^r3\s+gone\s.*\(1[4-6]s ago\)`, out)
	assert.Contains(t, out, "forgets")
}

// job NAME says the whole definition in words: kind, target, overlap, retries, auth,
// notify rules, labels.
func TestJobShowsTheWholeDefinition(t *testing.T) {
	t.Parallel()
	_, u := startFakeAPI(t, `{"admin":true}`, func(w http.ResponseWriter, r *http.Request) bool {
		w.Header().Set("Content-Type", "application/json")
		switch r.URL.Path {
		case "/v1/jobs/nightly":
			_, _ = w.Write([]byte(`{"name":"nightly","namespace":"default","enabled":true,"schedule":"0 2 * * *","schedule_text":"every day at 02:00",
				"time_zone":"Europe/Paris","timeout":"5m","catchup":"1h","kind":"http","version":3,"overlap":"skip","target":"POST https://example.com/hook",
				"labels":{"team":"billing"},"next_runs":[],
				"definition":{"name":"nightly","schedule":"0 2 * * *","time_zone":"Europe/Paris","overlap":"skip","labels":{"team":"billing"},
				"retry":{"max_attempts":3,"initial_backoff":"1s","max_backoff":"1m"},
				"http":{"method":"POST","url":"https://example.com/hook","auth":{"bearer_secret":"BILLING_TOKEN"},"signing_secret":"HOOK_KEY"},
				"notify":[{"on":["failed"],"slack":{"url_secret":"SLACK_URL"}}]}}`))
		case "/v1/jobs/nightly/runs":
			_, _ = w.Write([]byte(`{"runs":[],"next_cursor":null}`))
		default:
			return false
		}
		return true
	})
	code, out, stderr := runCLI(t, []string{"SCHEDULER_URL=" + u}, "job", "nightly")
	require.Equal(t, exitOK, code, stderr)
	for _, want := range []string{
		`(?m)^Kind: +http$`,
		`(?m)^Target: +POST https://example.com/hook$`,
		`(?m)^Overlap: +skip`,
		`(?m)^Retries: +up to 3 attempts, backoff 1s doubling to 1m$`,
		`(?m)^Auth: +bearer token from secret BILLING_TOKEN; body signed with secret HOOK_KEY$`,
		`(?m)^Notify: +on failed: Slack \(its URL in secret SLACK_URL\)$`,
		`(?m)^Labels: +team=billing$`,
		`(?m)^Version: +3$`,
	} {
		assert.Regexp(t, want, out)
	}
}

// A job whose calls carry the scheduler's OIDC token says so, with the token's audience.
func TestJobShowsOIDCAuth(t *testing.T) {
	t.Parallel()
	_, u := startFakeAPI(t, `{"admin":true}`, func(w http.ResponseWriter, r *http.Request) bool {
		w.Header().Set("Content-Type", "application/json")
		switch r.URL.Path {
		case "/v1/jobs/billing-sync":
			_, _ = w.Write([]byte(`{"name":"billing-sync","namespace":"default","enabled":true,"schedule":"@every 1m","kind":"http","version":1,
				"target":"POST https://billing.example.com/sync","next_runs":[],
				"definition":{"name":"billing-sync","schedule":"@every 1m","http":{"method":"POST","url":"https://billing.example.com/sync","auth":{"oidc":{"audience":"billing"}}}}}`))
		case "/v1/jobs/billing-sync/runs":
			_, _ = w.Write([]byte(`{"runs":[],"next_cursor":null}`))
		default:
			return false
		}
		return true
	})
	code, out, stderr := runCLI(t, []string{"SCHEDULER_URL=" + u}, "job", "billing-sync")
	require.Equal(t, exitOK, code, stderr)
	assert.Regexp(t, `(?m)^Auth: +OIDC token signed by the scheduler for audience billing$`, out)
}

// A NATS job says its server (or the secret holding it, never the URL's credentials) and
// the subject it publishes to.
func TestJobShowsNATSTarget(t *testing.T) {
	t.Parallel()
	_, u := startFakeAPI(t, `{"admin":true}`, func(w http.ResponseWriter, r *http.Request) bool {
		w.Header().Set("Content-Type", "application/json")
		switch r.URL.Path {
		case "/v1/jobs/orders":
			_, _ = w.Write([]byte(`{"name":"orders","namespace":"default","enabled":true,"schedule":"@every 1m","kind":"nats","version":1,
				"target":"NATS publish to orders.daily on secret ORDERS_NATS","next_runs":[],
				"definition":{"name":"orders","schedule":"@every 1m","overlap":"skip","retry":{"max_attempts":3,"initial_backoff":"1s","max_backoff":"1m"},
				"nats":{"url_secret":"ORDERS_NATS","subject":"orders.daily"}}}`))
		case "/v1/jobs/orders/runs":
			_, _ = w.Write([]byte(`{"runs":[],"next_cursor":null}`))
		default:
			return false
		}
		return true
	})
	code, out, stderr := runCLI(t, []string{"SCHEDULER_URL=" + u}, "job", "orders")
	require.Equal(t, exitOK, code, stderr)
	for _, want := range []string{
		`(?m)^Kind: +nats$`,
		`(?m)^NATS server: +the URL in secret ORDERS_NATS$`,
		`(?m)^NATS subject: +orders.daily \(Nats-Msg-Id: the slot's key\)$`,
		`(?m)^Retries: +up to 3 attempts`,
	} {
		assert.Regexp(t, want, out)
	}
}
