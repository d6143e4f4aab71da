package replica_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schedulerhq/scheduler/internal/config"
	"github.com/schedulerhq/scheduler/internal/testpace"
	"github.com/schedulerhq/scheduler/replica/replicatest"
)

// Each namespace has its own outbound surface, set by an admin: SQL targets, private hosts
// and the operator's environment secrets. These are the attacks of a hostile or merely new
// team against another's, each through the API of a whole replica.

// outboundCluster is a replica with SQL targets APP1 and APP2 (meant for teama and teamb),
// APP2_AGAIN (APP2's login under another name) and DEMO (the operator's), none reachable:
// what a definition may name is decided before any connection.
func outboundCluster(t *testing.T, rt config.Runtime) *replicatest.Server {
	t.Helper()
	rt.SQLTargets = map[string]config.SQLTarget{
		"APP1":       {URL: "postgres://app1_jobs:pw1@127.0.0.1:1/app1"},
		"APP2":       {URL: "postgres://app2_jobs:pw2@127.0.0.1:1/app2"},
		"APP2_AGAIN": {URL: "postgres://app2_jobs:pw2@127.0.0.1:1/app2?connect_timeout=5"},
		"DEMO":       {URL: "postgres://demo_jobs:pwdemo@127.0.0.1:1/demo"},
	}
	return replicatest.Start(t, replicatest.Options{Token: e2eToken, Runtime: rt})
}

type apiAnswer struct {
	status int
	body   string
}

func (a apiAnswer) json(t *testing.T) map[string]any {
	t.Helper()
	var m map[string]any
	require.NoError(t, json.Unmarshal([]byte(a.body), &m), "%s", a.body)
	return m
}

// callAs sends one API request with bearer token.
func callAs(t *testing.T, base, token, method, path, body string) apiAnswer {
	t.Helper()
	req, err := http.NewRequest(method, base+path, strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+token)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	res, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	return apiAnswer{res.StatusCode, string(b)}
}

// must sends a request as the admin and requires the status.
func must(t *testing.T, srv *replicatest.Server, want int, method, path, body string) apiAnswer {
	t.Helper()
	a := callAs(t, srv.URL, e2eToken, method, path, body)
	require.Equal(t, want, a.status, "%s %s: %s", method, path, a.body)
	return a
}

// editorOf makes namespace ns and returns an editor token of it.
func editorOf(t *testing.T, srv *replicatest.Server, ns, body string) string {
	t.Helper()
	callAs(t, srv.URL, e2eToken, "PUT", "/v1/namespaces/"+ns, body)
	a := must(t, srv, http.StatusCreated, "POST", "/v1/tokens", fmt.Sprintf(`{"name": "%s-editor", "role": "editor", "namespace": %q}`, ns, ns))
	return a.json(t)["token"].(string)
}

func sqlJob(name, target string) string {
	return fmt.Sprintf(`{"name": %q, "schedule": "0 0 1 1 *", "sql": {"target": %q, "statements": "SELECT 1"}}`, name, target)
}

func TestTeamCannotNameAnotherTeamsSQLTarget(t *testing.T) {
	srv := outboundCluster(t, config.Runtime{})
	teama := editorOf(t, srv, "teama", `{"sql_targets": ["app1"]}`)
	editorOf(t, srv, "teamb", `{"sql_targets": ["APP2"]}`)
	teamc := editorOf(t, srv, "teamc", "")

	a := callAs(t, srv.URL, teama, "POST", "/v1/namespaces/teama/jobs", sqlJob("steal", "APP2"))
	require.Equal(t, http.StatusUnprocessableEntity, a.status, "teama's editor names teamb's target: %s", a.body)
	assert.Contains(t, a.body, `\"APP2\" is not a SQL target of namespace teama; its targets: APP1`, "the refusal lists the namespace's own targets")
	a = callAs(t, srv.URL, teama, "POST", "/v1/namespaces/teama/jobs", sqlJob("steal", "APP2_AGAIN"))
	require.Equal(t, http.StatusUnprocessableEntity, a.status, "the same login under another name: %s", a.body)
	a = callAs(t, srv.URL, teama, "POST", "/v1/namespaces/teama/jobs", sqlJob("own", "app1"))
	require.Equal(t, http.StatusCreated, a.status, "its own target: %s", a.body)

	a = callAs(t, srv.URL, teamc, "POST", "/v1/namespaces/teamc/jobs", sqlJob("demo", "DEMO"))
	require.Equal(t, http.StatusUnprocessableEntity, a.status, "a new team names the operator's DEMO target: %s", a.body)
	assert.Contains(t, a.body, "which has none: an admin binds one with PUT /v1/namespaces/teamc")
	assert.NotContains(t, a.body, "APP2", "a team's refusal names no other team's target")

	// Namespace default, never set, keeps every target no other namespace has bound.
	must(t, srv, http.StatusCreated, "POST", "/v1/jobs", sqlJob("demo", "DEMO"))
	a = must(t, srv, http.StatusUnprocessableEntity, "POST", "/v1/jobs", sqlJob("steal", "APP2"))
	assert.Contains(t, a.body, "its targets: DEMO")
	ns := must(t, srv, http.StatusOK, "GET", "/v1/namespaces/teama", "").json(t)
	assert.Equal(t, []any{"APP1"}, ns["sql_targets"])
}

// A definition stored while its namespace had the target fails its run, nothing run, once an
// admin has taken the target away, and says so.
func TestStoredSQLJobOfAnUnboundTargetFailsItsRun(t *testing.T) {
	srv := outboundCluster(t, config.Runtime{})
	teama := editorOf(t, srv, "teama", `{"sql_targets": ["APP2"]}`)
	a := callAs(t, srv.URL, teama, "POST", "/v1/namespaces/teama/jobs", sqlJob("read-b", "APP2"))
	require.Equal(t, http.StatusCreated, a.status, "%s", a.body)
	must(t, srv, http.StatusOK, "PUT", "/v1/namespaces/teama", `{"sql_targets": []}`)
	must(t, srv, http.StatusCreated, "PUT", "/v1/namespaces/teamb", `{"sql_targets": ["APP2"]}`)

	run := callAs(t, srv.URL, teama, "POST", "/v1/namespaces/teama/jobs/read-b/runs?wait=30s", "")
	require.Equal(t, http.StatusOK, run.status, "%s", run.body)
	got := run.json(t)
	assert.Equal(t, "failed", got["status"])
	assert.Contains(t, got["error"], `not run: "APP2" is not a SQL target of namespace teama, which has none`)
}

// A login serves one namespace: a target whose login another namespace has bound is refused,
// under any name.
func TestBindingALoginBoundElsewhereIsRefused(t *testing.T) {
	srv := outboundCluster(t, config.Runtime{})
	must(t, srv, http.StatusCreated, "PUT", "/v1/namespaces/teamb", `{"sql_targets": ["APP2"]}`)
	must(t, srv, http.StatusCreated, "PUT", "/v1/namespaces/teama", `{"max_jobs": 5}`)
	for _, target := range []string{"APP2", "APP2_AGAIN"} {
		a := must(t, srv, http.StatusUnprocessableEntity, "PUT", "/v1/namespaces/teama", `{"sql_targets": ["APP1", "`+target+`"]}`)
		assert.Contains(t, a.body, `"field":"sql_targets[1]","detail":"target `+target+` connects as login app2_jobs@127.0.0.1:1/app2, which namespace teamb has bound`)
		assert.NotContains(t, a.body, "pw2", "no password in the answer")
	}
	ns := must(t, srv, http.StatusOK, "GET", "/v1/namespaces/teama", "").json(t)
	assert.Equal(t, []any{}, ns["sql_targets"], "a refused PUT changes nothing")
	assert.Equal(t, 5.0, ns["max_jobs"], "a refused PUT changes nothing")
	a := must(t, srv, http.StatusUnprocessableEntity, "PUT", "/v1/namespaces/teama", `{"sql_targets": ["NOPE"]}`)
	assert.Contains(t, a.body, `\"NOPE\" is not a declared SQL target; declared: APP1, APP2, APP2_AGAIN, DEMO`)

	// Released, it may be bound elsewhere.
	must(t, srv, http.StatusOK, "PUT", "/v1/namespaces/teamb", `{"sql_targets": []}`)
	must(t, srv, http.StatusOK, "PUT", "/v1/namespaces/teama", `{"sql_targets": ["APP2_AGAIN"]}`)
}

// Two admins binding one login to two namespaces at once: exactly one wins, every round.
func TestBindingOneLoginConcurrentlyHasOneWinner(t *testing.T) {
	srv := outboundCluster(t, config.Runtime{})
	const teams = 6
	for i := range teams {
		must(t, srv, http.StatusCreated, "PUT", fmt.Sprintf("/v1/namespaces/team%d", i), "")
	}
	for round := range 5 {
		var wg sync.WaitGroup
		answers := make([]apiAnswer, teams)
		start := make(chan struct{})
		for i := range teams {
			wg.Go(func() {
				<-start
				target := []string{"APP2", "APP2_AGAIN"}[i%2]
				answers[i] = callAs(t, srv.URL, e2eToken, "PUT", fmt.Sprintf("/v1/namespaces/team%d", i), `{"sql_targets": ["`+target+`"]}`)
			})
		}
		close(start)
		wg.Wait()
		winners := 0
		for i, a := range answers {
			switch a.status {
			case http.StatusOK:
				winners++
			case http.StatusUnprocessableEntity:
				assert.Contains(t, a.body, "a login serves one namespace", "team%d", i)
			default:
				t.Fatalf("round %d team%d: %d %s", round, i, a.status, a.body)
			}
		}
		require.Equal(t, 1, winners, "round %d: one namespace binds the login: %v", round, answers)
		var holders int
		require.NoError(t, srv.DB.Pool.QueryRow(t.Context(),
			`SELECT count(*) FROM scheduler_namespaces WHERE sql_targets && ARRAY['APP2', 'APP2_AGAIN']`).Scan(&holders))
		require.Equal(t, 1, holders, "round %d", round)
		for i := range teams {
			must(t, srv, http.StatusOK, "PUT", fmt.Sprintf("/v1/namespaces/team%d", i), `{"sql_targets": []}`)
		}
	}
}

// The environment's secrets are the operator's: a target's password is never named, and
// another needs an admin's grant (namespace default, never set, has every other).
func TestEnvSecretsNeedAGrant(t *testing.T) {
	srv := outboundCluster(t, config.Runtime{HTTPAllow: []string{"127.0.0.1/32"}, Secrets: map[string]string{
		"OPS_TOKEN": "ops-token-value", "BILLING_TOKEN": "billing-token-value", "APP1_PASSWORD": "pw1"}})
	job := func(name, secret string) string {
		return fmt.Sprintf(`{"name": %q, "schedule": "0 0 1 1 *", "http": {"url": "https://hooks.example.com/x", "auth": {"bearer_secret": %q}}}`, name, secret)
	}
	a := must(t, srv, http.StatusUnprocessableEntity, "POST", "/v1/jobs", job("leak", "APP1_PASSWORD"))
	assert.Contains(t, a.body, "secret APP1_PASSWORD is not set in namespace default")
	must(t, srv, http.StatusCreated, "POST", "/v1/jobs", job("ops", "OPS_TOKEN"))

	a = must(t, srv, http.StatusUnprocessableEntity, "PUT", "/v1/namespaces/default", `{"env_secrets": ["OPS_TOKEN", "APP1_PASSWORD", "UNSET"]}`)
	assert.Contains(t, a.body, "SCHEDULER_SECRET_APP1_PASSWORD holds a SQL target's password")
	assert.Contains(t, a.body, "SCHEDULER_SECRET_UNSET is not set on this scheduler")
	must(t, srv, http.StatusOK, "PUT", "/v1/namespaces/default", `{"env_secrets": ["OPS_TOKEN"]}`)
	editor := must(t, srv, http.StatusCreated, "POST", "/v1/tokens", `{"name": "de", "role": "editor", "namespace": "default"}`).json(t)["token"].(string)
	a = callAs(t, srv.URL, editor, "POST", "/v1/jobs", job("billing", "BILLING_TOKEN"))
	require.Equal(t, http.StatusUnprocessableEntity, a.status, "an editor of default names an ungranted env secret: %s", a.body)
	assert.Contains(t, a.body, `an admin grants it with PUT /v1/namespaces/default {\"env_secrets\": [\"BILLING_TOKEN\"]}`)

	teamc := editorOf(t, srv, "teamc", "")
	a = callAs(t, srv.URL, teamc, "POST", "/v1/namespaces/teamc/jobs", job("ops", "OPS_TOKEN"))
	require.Equal(t, http.StatusUnprocessableEntity, a.status, "%s", a.body)
	must(t, srv, http.StatusOK, "PUT", "/v1/namespaces/teamc", `{"env_secrets": ["OPS_TOKEN"]}`)
	a = callAs(t, srv.URL, teamc, "POST", "/v1/namespaces/teamc/jobs", job("ops", "OPS_TOKEN"))
	require.Equal(t, http.StatusCreated, a.status, "granted: %s", a.body)
}

// A namespace's private host is reachable by its jobs, not by another namespace's; an entry
// outside SCHEDULER_HTTP_ALLOW is refused.
func TestNamespacePrivateHostIsItsOwn(t *testing.T) {
	var mu sync.Mutex
	var calls []string
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		calls = append(calls, r.URL.Path)
		mu.Unlock()
	}))
	t.Cleanup(receiver.Close)
	srv := outboundCluster(t, config.Runtime{HTTPAllow: []string{"127.0.0.1/32", "10.1.0.0/16"}})
	hook := func(name string) string {
		return fmt.Sprintf(`{"name": %q, "schedule": "0 0 1 1 *", "http": {"url": %q}}`, name, receiver.URL+"/"+name)
	}
	a := must(t, srv, http.StatusUnprocessableEntity, "PUT", "/v1/namespaces/teama", `{"http_allow": ["10.0.0.0/8", "10.1.2.0/24", "db.internal", "not a host"]}`)
	assert.Contains(t, a.body, "10.0.0.0/8 not inside the operator's SCHEDULER_HTTP_ALLOW (10.1.0.0/16, 127.0.0.1): an operator must allow it there first")
	assert.Contains(t, a.body, "db.internal not inside")
	assert.Contains(t, a.body, "not a host")
	assert.NotContains(t, a.body, "http_allow[1]", "an entry inside the operator's list is fine")

	teama := editorOf(t, srv, "teama", `{"http_allow": ["127.0.0.1"]}`)
	teamb := editorOf(t, srv, "teamb", "")
	a = callAs(t, srv.URL, teamb, "POST", "/v1/namespaces/teamb/jobs", hook("b"))
	require.Equal(t, http.StatusUnprocessableEntity, a.status, "teamb calls teama's private host: %s", a.body)
	assert.Contains(t, a.body, "an admin can allow it in namespace teamb's http_allow")
	a = callAs(t, srv.URL, teama, "POST", "/v1/namespaces/teama/jobs", hook("a"))
	require.Equal(t, http.StatusCreated, a.status, "%s", a.body)
	run := callAs(t, srv.URL, teama, "POST", "/v1/namespaces/teama/jobs/a/runs?wait=30s", "")
	require.Equal(t, "succeeded", run.json(t)["status"], "%s", run.body)

	// Taken away, the stored job's runs are refused before anything is sent, from at most a
	// second later on (a slot's calls share one read of the allowance a second).
	must(t, srv, http.StatusOK, "PUT", "/v1/namespaces/teama", `{"http_allow": []}`)
	var got map[string]any
	for deadline := time.Now().Add(testpace.Scaled(5 * time.Second)); ; {
		run = callAs(t, srv.URL, teama, "POST", "/v1/namespaces/teama/jobs/a/runs?wait=30s", "")
		if got = run.json(t); got["status"] == "failed" || time.Now().After(deadline) {
			break
		}
	}
	assert.Equal(t, "failed", got["status"], "%s", run.body)
	assert.Contains(t, got["error"], "not attempted: url host 127.0.0.1 is a loopback address; an admin can allow it in namespace teama's http_allow")
	mu.Lock()
	for _, c := range calls {
		assert.Equal(t, "/a", c, "every call was teama's, made while it was allowed")
	}
	mu.Unlock()
}
