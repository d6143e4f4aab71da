package api

import (
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// jobJSON is a runtime job definition in JSON.
type jobJSON string

// httpJob is a runtime job definition named name, with no secret, daily at 02:00.
func httpJob(name string) jobJSON {
	return jobJSON(fmt.Sprintf(`{"name": %q, "schedule": "0 2 * * *", "http": {"url": "https://billing.internal/x"}}`, name))
}

func (j jobJSON) replaceSchedule(spec string) string {
	return strings.Replace(string(j), "0 2 * * *", spec, 1)
}

// team is a test's namespaces billing and ops, a job in each, and a token of each role.
type team struct {
	*testAPI
	tokens map[string]string // principal → bearer
	runs   map[string]string // namespace → the id of a run of its job
}

// newTeam makes namespaces billing and ops with a job each, and tokens: a viewer and an
// editor of billing, an editor of ops, and the environment's admin and read-all tokens.
func newTeam(t *testing.T) *team {
	t.Helper()
	a := newRuntimeAPI(t, 0)
	tm := &team{testAPI: a, tokens: map[string]string{"admin": testToken, "read-all": testReadToken}, runs: map[string]string{}}
	for _, ns := range []string{"billing", "ops"} {
		res := a.do("PUT", "/v1/namespaces/"+ns, "", nil)
		require.Equal(t, http.StatusCreated, res.Status, "%s", res.Body)
		res = a.do("POST", "/v1/namespaces/"+ns+"/jobs", string(httpJob("report")), nil)
		require.Equal(t, http.StatusCreated, res.Status, "%s", res.Body)
		res = a.do("POST", "/v1/namespaces/"+ns+"/jobs/report/runs", "", nil)
		require.Equal(t, http.StatusAccepted, res.Status, "%s", res.Body)
		tm.runs[ns] = fmt.Sprintf("%.0f", res.JSON(t)["id"]) // ids stay below 2^53
	}
	for name, spec := range map[string]string{
		"billing-viewer": `{"name": "bv", "role": "viewer", "namespace": "billing"}`,
		"billing-editor": `{"name": "be", "role": "editor", "namespace": "billing"}`,
		"ops-editor":     `{"name": "oe", "role": "editor", "namespace": "ops"}`,
	} {
		res := a.do("POST", "/v1/tokens", spec, nil)
		require.Equal(t, http.StatusCreated, res.Status, "%s", res.Body)
		tm.tokens[name] = res.JSON(t)["token"].(string)
	}
	return tm
}

func (tm *team) as(who, method, path, body string) response {
	tm.t.Helper()
	return tm.do(method, path, body, header{"Authorization": "Bearer " + tm.tokens[who]})
}

// TestEveryRouteByRoleAndNamespace calls every route as every kind of caller, in its own
// namespace and in another's, and checks who is refused: a viewer reads its namespace, an
// editor also changes it, only an admin touches built-in jobs, namespaces, tokens and
// leadership. Allowed calls may still fail for other reasons (404, 409); they are never 403.
func TestEveryRouteByRoleAndNamespace(t *testing.T) {
	tm := newTeam(t)
	// What each caller may do, written out here rather than asked of internal/access.
	reads := map[string][]string{"admin": {"*"}, "read-all": {"*"}, "billing-viewer": {"billing"},
		"billing-editor": {"billing"}, "ops-editor": {"ops"}}
	edits := map[string][]string{"admin": {"*"}, "billing-editor": {"billing"}, "ops-editor": {"ops"}}
	in := func(list []string, ns string) bool {
		for _, v := range list {
			if v == "*" || v == ns {
				return true
			}
		}
		return false
	}
	type route struct {
		method, path, body string
		ns                 string // the namespace the route is in; "" for admin-only
		edit               bool
	}
	var routes []route
	for _, ns := range []string{"billing", "ops"} {
		base := "/v1/namespaces/" + ns
		routes = append(routes,
			route{"GET", base, "", ns, false},
			route{"GET", base + "/jobs", "", ns, false},
			route{"GET", base + "/jobs/report", "", ns, false},
			route{"GET", base + "/jobs/report/runs", "", ns, false},
			route{"GET", "/v1/runs/" + tm.runs[ns], "", ns, false},
			route{"GET", "/v1/audit?namespace=" + ns, "", ns, false},
			route{"POST", base + "/jobs", string(httpJob("new-one")), ns, true},
			route{"PUT", base + "/jobs/report", string(httpJob("report")), ns, true},
			route{"DELETE", base + "/jobs/ghost", "", ns, true},
			route{"POST", base + "/jobs/report/pause", "", ns, true},
			route{"POST", base + "/jobs/report/resume", "", ns, true},
			route{"POST", base + "/jobs/report/runs", "", ns, true},
			route{"POST", "/v1/runs/" + tm.runs[ns] + "/cancel", "", ns, true},
			route{"GET", base + "/secrets", "", ns, false},
			route{"GET", base + "/secrets/TOKEN", "", ns, false},
			route{"PUT", base + "/secrets/TOKEN", `{"value": "v", "allowed_hosts": ["api.example.com"]}`, ns, true},
			route{"DELETE", base + "/secrets/GHOST", "", ns, true},
		)
	}
	// Namespace default: its runtime jobs, and the built-in jobs (read there, acted on by
	// an admin alone).
	routes = append(routes,
		route{"GET", "/v1/jobs", "", "default", false},
		route{"GET", "/v1/jobs/plan-change", "", "default", false},
		route{"GET", "/v1/locks", "", "default", false},
		route{"POST", "/v1/jobs", string(httpJob("default-one")), "default", true},
		route{"POST", "/v1/jobs/plan-change/runs", "", "", true},
		route{"POST", "/v1/jobs/plan-change/pause", "", "", true},
		route{"POST", "/v1/jobs/plan-change/resume", "", "", true},
		route{"PUT", "/v1/namespaces/new-team", "", "", true},
		route{"GET", "/v1/tokens", "", "", false},
		route{"POST", "/v1/tokens", `{"name": "x", "role": "viewer", "namespace": "ops"}`, "", true},
		route{"DELETE", "/v1/tokens/tok_0000000000000000", "", "", true},
		route{"POST", "/v1/leader/step-down", "", "", true},
	)
	for who := range tm.tokens {
		for _, rt := range routes {
			var allowed bool
			switch {
			case rt.ns == "":
				allowed = who == "admin"
			case rt.edit:
				allowed = in(edits[who], rt.ns)
			default:
				allowed = in(reads[who], rt.ns)
			}
			res := tm.as(who, rt.method, rt.path, rt.body)
			switch {
			case allowed:
				assert.NotContains(t, []int{401, 403}, res.Status, "%s %s as %s must be allowed: %s", rt.method, rt.path, who, res.Body)
			case strings.HasPrefix(rt.path, "/v1/runs/") && !in(reads[who], rt.ns) && (!rt.edit || len(edits[who]) > 0):
				// A run of a namespace the caller may not read is missing to it (a caller
				// who may change nothing is refused any action first).
				assert.Equal(t, http.StatusNotFound, res.Status, "%s %s as %s must be missing: %s", rt.method, rt.path, who, res.Body)
			default:
				assert.Equal(t, http.StatusForbidden, res.Status, "%s %s as %s must be refused: %s", rt.method, rt.path, who, res.Body)
			}
		}
	}
}

// TestViewerSeesOnlyItsNamespace: the lists a namespace's viewer reads hold nothing of
// another namespace: namespaces, jobs, audit rows.
func TestViewerSeesOnlyItsNamespace(t *testing.T) {
	tm := newTeam(t)
	res := tm.as("billing-viewer", "GET", "/v1/namespaces", "")
	require.Equal(t, http.StatusOK, res.Status)
	assert.Equal(t, []any{"billing"}, pluck(res.JSON(t)["namespaces"], "name"))

	res = tm.as("billing-viewer", "GET", "/v1/namespaces/billing/jobs", "")
	require.Equal(t, http.StatusOK, res.Status)
	jobs := res.JSON(t)["jobs"]
	assert.Equal(t, []any{"report"}, pluck(jobs, "name"))
	assert.Equal(t, []any{"billing"}, pluck(jobs, "namespace"))

	res = tm.as("billing-viewer", "GET", "/v1/audit", "")
	require.Equal(t, http.StatusOK, res.Status)
	actions := res.JSON(t)["actions"].([]any)
	require.NotEmpty(t, actions)
	for _, a := range actions {
		assert.Equal(t, "billing", a.(map[string]any)["namespace"], "audit row %v", a)
	}
	// The admin's rows name the token that acted.
	res = tm.do("GET", "/v1/audit?namespace=ops", "", nil)
	row := res.JSON(t)["actions"].([]any)[0].(map[string]any)
	assert.Equal(t, "env:SCHEDULER_API_TOKEN", row["token_id"])
	assert.Equal(t, "ops", row["namespace"])

	// A job of the same name in two namespaces is two jobs.
	res = tm.as("ops-editor", "PUT", "/v1/namespaces/ops/jobs/report", httpJob("report").replaceSchedule("0 4 * * *"))
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	res = tm.as("billing-viewer", "GET", "/v1/namespaces/billing/jobs/report", "")
	assert.Equal(t, "0 2 * * *", res.JSON(t)["schedule"])
}

func pluck(list any, key string) []any {
	var out []any
	for _, v := range list.([]any) {
		out = append(out, v.(map[string]any)[key])
	}
	return out
}

// TestUnknownNamespaceIsNotFoundOnlyToThoseWhoMayKnow: an admin learns a namespace does not
// exist; an editor of another namespace is refused without learning it.
func TestUnknownNamespaceIsNotFoundOnlyToThoseWhoMayKnow(t *testing.T) {
	tm := newTeam(t)
	res := tm.do("GET", "/v1/namespaces/nowhere/jobs", "", nil)
	assert.Equal(t, http.StatusNotFound, res.Status)
	assert.Equal(t, "namespace-not-found", res.problemType(t))
	res = tm.as("billing-editor", "GET", "/v1/namespaces/nowhere/jobs", "")
	assert.Equal(t, http.StatusForbidden, res.Status)
	res = tm.as("billing-editor", "POST", "/v1/namespaces/billing/jobs", `{"name": "x", "namespace": "ops", "schedule": "0 2 * * *", "http": {"url": "https://billing.internal/x"}}`)
	assert.Equal(t, http.StatusUnprocessableEntity, res.Status, "a body cannot move a job into another namespace: %s", res.Body)
	assert.Equal(t, "namespace", res.problemField(t))
}

// TestNamespaceQuotasRefuseWhatPassesThem: max_jobs holds under concurrent creates, and
// min_interval refuses a schedule faster than it.
func TestNamespaceQuotasRefuseWhatPassesThem(t *testing.T) {
	tm := newTeam(t)
	res := tm.do("PUT", "/v1/namespaces/small", `{"max_jobs": 3, "min_interval": "1h"}`, nil)
	require.Equal(t, http.StatusCreated, res.Status, "%s", res.Body)
	const tries = 12
	statuses := make([]int, tries)
	var wg sync.WaitGroup
	for i := range tries {
		wg.Go(func() {
			statuses[i] = tm.do("POST", "/v1/namespaces/small/jobs", string(httpJob(fmt.Sprintf("job-%d", i))), nil).Status
		})
	}
	wg.Wait()
	created, refused := 0, 0
	for _, s := range statuses {
		switch s {
		case http.StatusCreated:
			created++
		case http.StatusUnprocessableEntity:
			refused++
		}
	}
	assert.Equal(t, 3, created, "statuses %v", statuses)
	assert.Equal(t, tries-3, refused, "statuses %v", statuses)
	res = tm.do("POST", "/v1/namespaces/small/jobs", string(httpJob("one-more")), nil)
	assert.Equal(t, "namespace-quota", res.problemType(t))

	res = tm.do("PUT", "/v1/namespaces/small", `{"min_interval": "1h"}`, nil)
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	res = tm.do("POST", "/v1/namespaces/small/jobs", httpJob("fast").replaceSchedule("*/5 * * * *"), nil)
	assert.Equal(t, http.StatusUnprocessableEntity, res.Status, "%s", res.Body)
	assert.Equal(t, "schedule", res.problemField(t))
	assert.Contains(t, string(res.Body), "min_interval")
}

// TestRevokedTokenIsRefusedByEveryReplicaWithin2s: two API servers on one database, each
// having just accepted the token; a revocation on one is refused by both within 2 s.
func TestRevokedTokenIsRefusedByEveryReplicaWithin2s(t *testing.T) {
	tm := newTeam(t)
	other := newTestAPI(t)
	other.db = tm.db
	other.server = NewServer(Config{DB: tm.db.DB, InstanceID: "api-test-2", Jobs: testJobs(t), APIToken: testToken})
	other.http.Config.Handler = other.server.Handler()
	bearer := header{"Authorization": "Bearer " + tm.tokens["billing-editor"]}
	for _, a := range []*testAPI{tm.testAPI, other} {
		require.Equal(t, http.StatusOK, a.do("GET", "/v1/namespaces/billing/jobs", "", bearer).Status)
	}
	res := tm.do("GET", "/v1/tokens", "", nil)
	var id string
	for _, tok := range res.JSON(t)["tokens"].([]any) {
		if tok.(map[string]any)["name"] == "be" {
			id = tok.(map[string]any)["id"].(string)
		}
		assert.NotContains(t, tok, "token", "GET /v1/tokens never shows a value")
	}
	revoked := time.Now()
	require.Equal(t, http.StatusNoContent, tm.do("DELETE", "/v1/tokens/"+id, "", nil).Status)
	for _, a := range []*testAPI{tm.testAPI, other} {
		require.Eventually(t, func() bool {
			return a.do("GET", "/v1/namespaces/billing/jobs", "", bearer).Status == http.StatusUnauthorized
		}, 2*time.Second-time.Since(revoked), 20*time.Millisecond, "the revoked token still works after 2 s")
	}
}

// TestExpiredTokenIsRefused: a token past its expiry is a 401, and its value is kept only
// as a hash.
func TestExpiredTokenIsRefused(t *testing.T) {
	tm := newTeam(t)
	res := tm.do("POST", "/v1/tokens", `{"name": "short", "role": "viewer", "namespace": "ops", "expires_in": "1h"}`, nil)
	require.Equal(t, http.StatusCreated, res.Status)
	value := res.JSON(t)["token"].(string)
	bearer := header{"Authorization": "Bearer " + value}
	require.Equal(t, http.StatusOK, tm.do("GET", "/v1/namespaces/ops/jobs", "", bearer).Status)
	assert.Zero(t, countRows(t, tm.testAPI, fmt.Sprintf(
		`SELECT count(*) FROM scheduler_tokens t WHERE t::text LIKE '%%%s%%'`, value)), "the value is stored")
	tm.exec(`UPDATE scheduler_tokens SET expires_at = now() - interval '1 second' WHERE name = 'short'`)
	require.Eventually(t, func() bool {
		return tm.do("GET", "/v1/namespaces/ops/jobs", "", bearer).Status == http.StatusUnauthorized
	}, 2*time.Second, 20*time.Millisecond)
}
