package api

import (
	"context"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schedulerhq/scheduler/internal/metrics"
	"github.com/schedulerhq/scheduler/internal/store"
)

// Nothing one team does shows in another's view: the answers a caller gets about another
// namespace's runs, backfills and routes, and the audit rows its refusals leave.

// missingID is a run or backfill id that no row has.
const missingID = "900719925474099"

// digits are the ids in a problem's detail, replaced so two answers can be compared.
var digits = regexp.MustCompile(`[0-9]+`)

// sameAsMissing asserts that an answer about another namespace's id is the answer about an
// id that no row has: status, problem type and detail alike, the ids aside.
func sameAsMissing(t *testing.T, what string, got, missing response) {
	t.Helper()
	assert.Equal(t, missing.Status, got.Status, "%s: %s", what, got.Body)
	assert.Equal(t, missing.problemType(t), got.problemType(t), "%s", what)
	norm := func(r response) any {
		m := r.JSON(t)
		delete(m, "request_id")
		delete(m, "instance")
		return digits.ReplaceAllString(fmt.Sprint(m), "N")
	}
	assert.Equal(t, norm(missing), norm(got), "%s: the answer differs from a missing id's", what)
	assert.NotContains(t, string(got.Body), "ops", "%s names the other namespace", what)
}

// TestAnotherNamespacesRunsAndBackfillsLookMissing: an editor of billing asking for, cancelling or
// re-running a run of ops, or reading or cancelling a backfill of ops, gets the answer a
// missing id gets; a route of ops says only what the caller's token may do.
func TestAnotherNamespacesRunsAndBackfillsLookMissing(t *testing.T) {
	tm := newTeam(t)
	since := time.Now().Add(-72 * time.Hour).UTC().Truncate(time.Second)
	b, err := tm.db.CreateBackfill(context.Background(), store.Backfill{Job: "ops/report", Since: since,
		Until: since.Add(time.Hour), Only: "all", Slots: []time.Time{since}})
	require.NoError(t, err)
	backfill := fmt.Sprint(b.ID)
	for _, c := range []struct{ method, path string }{
		{"GET", "/v1/runs/%s"},
		{"POST", "/v1/runs/%s/cancel"},
		{"POST", "/v1/runs/%s/rerun"},
	} {
		missing := tm.as("billing-editor", c.method, fmt.Sprintf(c.path, missingID), "")
		require.Equal(t, http.StatusNotFound, missing.Status, "%s", missing.Body)
		got := tm.as("billing-editor", c.method, fmt.Sprintf(c.path, tm.runs["ops"]), "")
		sameAsMissing(t, c.method+" "+c.path, got, missing)
	}
	for _, c := range []struct{ method, path string }{
		{"GET", "/v1/backfills/%s"},
		{"POST", "/v1/backfills/%s/cancel"},
	} {
		missing := tm.as("billing-editor", c.method, fmt.Sprintf(c.path, missingID), "")
		require.Equal(t, http.StatusNotFound, missing.Status, "%s", missing.Body)
		got := tm.as("billing-editor", c.method, fmt.Sprintf(c.path, backfill), "")
		sameAsMissing(t, c.method+" "+c.path, got, missing)
	}
	// The owner still sees its own.
	res := tm.as("ops-editor", "GET", "/v1/backfills/"+backfill, "")
	assert.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	res = tm.as("ops-editor", "GET", "/v1/runs/"+tm.runs["ops"], "")
	assert.Equal(t, http.StatusOK, res.Status, "%s", res.Body)

	for _, c := range []struct{ method, path, body string }{
		{"GET", "/v1/namespaces/ops/jobs", ""},
		{"GET", "/v1/namespaces/ops", ""},
		{"GET", "/v1/audit?namespace=ops", ""},
		{"POST", "/v1/namespaces/ops/jobs/report/pause", ""},
		{"PUT", "/v1/namespaces/ops", ""},
	} {
		res := tm.as("billing-editor", c.method, c.path, c.body)
		require.Equal(t, http.StatusForbidden, res.Status, "%s %s: %s", c.method, c.path, res.Body)
		detail := res.JSON(t)["detail"].(string)
		assert.NotContains(t, detail, "ops", "%s %s: a 403 names nothing of another namespace", c.method, c.path)
		assert.Contains(t, detail, "editor of billing", "%s %s: a 403 says what the caller's token may do", c.method, c.path)
	}
}

// TestReplicaWithoutEnvTokenRefusesTokensItCannotHonour: on a loopback replica without
// SCHEDULER_API_TOKEN, a request without a token acts as an admin, but a revoked, an
// expired or a made-up token is refused 401 (it once acted as an admin and stepped the
// leader down).
func TestReplicaWithoutEnvTokenRefusesTokensItCannotHonour(t *testing.T) {
	t.Parallel()
	a := newTestAPI(t)
	open := NewServer(Config{DB: a.db.DB, InstanceID: testInstance, Jobs: testJobs(t)})
	a.http.Config.Handler = open.Handler()
	noToken := header{"Authorization": ""}
	mint := func(spec string) (id, value string) {
		res := a.do("POST", "/v1/tokens", spec, noToken)
		require.Equal(t, http.StatusCreated, res.Status, "%s", res.Body)
		m := res.JSON(t)
		return m["id"].(string), m["token"].(string)
	}
	revokedID, revoked := mint(`{"name": "gone", "role": "admin"}`)
	require.Equal(t, http.StatusNoContent, a.do("DELETE", "/v1/tokens/"+revokedID, "", noToken).Status)
	_, expired := mint(`{"name": "old", "role": "admin", "expires_in": "1h"}`)
	a.exec(`UPDATE scheduler_tokens SET expires_at = now() - interval '1 second' WHERE name = 'old'`)
	_, live := mint(`{"name": "ok", "role": "viewer", "namespace": "default"}`)

	for name, token := range map[string]string{"revoked": revoked, "expired": expired, "made-up": "sched_made_up_0123456789"} {
		bearer := header{"Authorization": "Bearer " + token}
		res := a.do("GET", "/v1/jobs", "", bearer)
		assert.Equal(t, http.StatusUnauthorized, res.Status, "a %s token: %s", name, res.Body)
		res = a.do("POST", "/v1/jobs/plan-change/pause", "", bearer)
		assert.Equal(t, http.StatusUnauthorized, res.Status, "a %s token: %s", name, res.Body)
	}
	assert.Zero(t, countRows(t, a, `SELECT count(*) FROM job_settings WHERE paused`), "a refused token paused a job")
	res := a.do("POST", "/v1/jobs/plan-change/pause", "", header{"Authorization": "Basic Zm9vOmJhcg=="})
	assert.Equal(t, http.StatusUnauthorized, res.Status, "a credential of another scheme: %s", res.Body)
	// A live token keeps its grants; no token at all stays the loopback admin.
	assert.Equal(t, http.StatusOK, a.do("GET", "/v1/jobs", "", header{"Authorization": "Bearer " + live}).Status)
	assert.Equal(t, http.StatusForbidden, a.do("POST", "/v1/jobs/plan-change/pause", "", header{"Authorization": "Bearer " + live}).Status)
	assert.Equal(t, http.StatusOK, a.do("POST", "/v1/jobs/plan-change/pause", "", noToken).Status)
}

// TestCallerTextStaysInItsOwnNamespace: an editor of billing refused in ops leaves no text
// of its choosing in ops's audit rows: nothing of the path, reason or request id it sent.
func TestCallerTextStaysInItsOwnNamespace(t *testing.T) {
	tm := newTeam(t)
	const text = "wire-money-to-acct-4242"
	h := header{"Authorization": "Bearer " + tm.tokens["billing-editor"], "X-Request-Id": "req-" + text, "X-Reason": text}
	for _, c := range []struct{ method, path, body string }{
		{"POST", "/v1/namespaces/ops/jobs/" + text + "/pause", `{"reason": "` + text + `"}`},
		{"DELETE", "/v1/namespaces/ops/jobs/" + text, ""},
		{"GET", "/v1/namespaces/ops/jobs/" + text, ""},
		{"PUT", "/v1/namespaces/ops/secrets/" + strings.ToUpper(strings.ReplaceAll(text, "-", "_")), `{"value": "x"}`},
		{"PUT", "/v1/namespaces/ops", `{"max_jobs": 1}`},
	} {
		res := tm.do(c.method, c.path, c.body, h)
		require.Equal(t, http.StatusForbidden, res.Status, "%s %s: %s", c.method, c.path, res.Body)
	}
	for _, who := range []string{"admin", "ops-editor"} {
		for _, row := range tm.auditRows(who, "namespace=ops") {
			assert.NotContains(t, strings.ToLower(fmt.Sprint(row)), strings.ReplaceAll(text, "-", ""), "as %s: ops's audit row holds billing's text: %v", who, row)
			assert.NotContains(t, strings.ToLower(fmt.Sprint(row)), text, "as %s: ops's audit row holds billing's text: %v", who, row)
		}
	}
	// The refusals are still on record, where billing's own viewers and the admin see them.
	var found int
	for _, row := range tm.auditRows("billing-viewer", "action=refused") {
		if strings.Contains(fmt.Sprint(row["reason"]), "/v1/namespaces/ops") && row["request_id"] == "req-"+text {
			found++
		}
	}
	assert.Equal(t, 5, found, "billing's refusals are recorded in billing")
}

// TestOneCallersFloodDoesNotHideAnothersRefusal: while one token floods the replica with
// refused requests, far past the audit log's burst, another caller's refusal is still
// recorded; and a made-up token's flood from one address does not hide a token's.
func TestOneCallersFloodDoesNotHideAnothersRefusal(t *testing.T) {
	tm := newTeam(t)
	start := time.Now()
	var stop atomic.Bool
	defer stop.Store(true)
	var sent atomic.Int64
	past := make(chan struct{})
	var once sync.Once
	var wg sync.WaitGroup
	for _, flooder := range []header{
		{"Authorization": "Bearer " + tm.tokens["billing-viewer"]},
		{"Authorization": "Bearer made-up"},
	} {
		for range 2 {
			wg.Go(func() {
				for !stop.Load() {
					res := tm.do("POST", "/v1/namespaces/billing/jobs/report/pause", "", flooder)
					if (res.Status == http.StatusForbidden || res.Status == http.StatusUnauthorized) &&
						sent.Add(1) >= 4*refusalsBurst {
						once.Do(func() { close(past) })
					}
				}
			})
		}
	}
	receive(t, past, 30*time.Second, "the flood to pass four bursts")
	res := tm.as("ops-editor", "POST", "/v1/namespaces/billing/jobs/report/resume", "")
	require.Equal(t, http.StatusForbidden, res.Status, "%s", res.Body)
	stop.Store(true)
	wg.Wait()
	rows := tm.auditRows("admin", "action=refused&limit=500")
	var ops, viewer int
	for _, row := range rows {
		switch row["token_name"] {
		case "oe":
			ops++
		case "bv":
			viewer++
		}
	}
	assert.Equal(t, 1, ops, "the ops editor's refusal is recorded during another's flood")
	assert.LessOrEqual(t, viewer, refusalsBurst+int(time.Since(start).Seconds())+1, "one caller's flood is bounded")
}

// TestRefusalLimiterKeepsBoundedCallers: a limiter that has seen more callers than its cap
// remembers at most the cap, and still gives a new caller its burst.
func TestRefusalLimiterKeepsBoundedCallers(t *testing.T) {
	l := newCallerLimiter(1, 2, 100)
	for i := range 1000 {
		l.allow(fmt.Sprintf("caller-%d", i))
	}
	assert.LessOrEqual(t, l.recency.Len(), 100)
	assert.Len(t, l.byKey, l.recency.Len())
	assert.True(t, l.allow("newcomer"))
	assert.True(t, l.allow("newcomer"))
	assert.False(t, l.allow("newcomer"), "past its burst")
}

// TestMetricsTokenGuardsMetrics: with SCHEDULER_METRICS_TOKEN set, /metrics (which names
// every team's jobs) answers only that token: not a team's, not the API's, not none.
func TestMetricsTokenGuardsMetrics(t *testing.T) {
	t.Parallel()
	a := newTestAPI(t)
	rec := metrics.New()
	rec.SetJobPeriod("ops/secret-project", time.Hour)
	guarded := NewServer(Config{DB: a.db.DB, InstanceID: testInstance, Jobs: testJobs(t), APIToken: testToken,
		Recorder: rec, MetricsToken: "scrape-token"})
	a.http.Config.Handler = guarded.Handler()
	for name, h := range map[string]header{
		"no token":      {"Authorization": ""},
		"the API token": {},
		"a wrong token": {"Authorization": "Bearer scrape-tokeN"},
	} {
		res := a.do("GET", "/metrics", "", h)
		assert.Equal(t, http.StatusUnauthorized, res.Status, "%s: %s", name, res.Body)
		assert.NotContains(t, string(res.Body), "secret-project", name)
	}
	res := a.do("GET", "/metrics", "", header{"Authorization": "Bearer scrape-token"})
	assert.Equal(t, http.StatusOK, res.Status)
	assert.Contains(t, string(res.Body), `job_name="ops/secret-project"`)
}
