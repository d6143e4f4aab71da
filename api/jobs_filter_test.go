package api

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schedulerhq/scheduler/internal/store"
	"github.com/schedulerhq/scheduler/internal/store/storetest"
	"github.com/schedulerhq/scheduler/internal/testdb"
)

// names lists the names of an answer's jobs, following its next_cursor to the last page.
func (a *testAPI) jobNames(path string) []string {
	a.t.Helper()
	var names []string
	for {
		res := a.do("GET", path, "", nil)
		require.Equal(a.t, http.StatusOK, res.Status, "%s", res.Body)
		body := res.JSON(a.t)
		for _, n := range pluck(body["jobs"], "name") {
			names = append(names, n.(string))
		}
		next, _ := body["next_cursor"].(string)
		if next == "" {
			return names
		}
		base, _, _ := strings.Cut(path, "&cursor=")
		path = base + "&cursor=" + next
	}
}

// TestJobListFiltersAndCounts: the job list filters by state, kind, label and words over
// every job of the namespace, pages what matches, and counts the namespace's jobs by state.
func TestJobListFiltersAndCounts(t *testing.T) {
	t.Parallel()
	a := newRuntimeAPI(t, 0)
	for _, def := range []string{
		`{"name": "alpha", "schedule": "0 2 * * *", "labels": {"team": "billing"}, "http": {"url": "https://reports.internal/a"}}`,
		`{"name": "beta", "schedule": "0 2 * * *", "labels": {"team": "ops", "tier": "1"}, "http": {"url": "https://reports.internal/b"}}`,
		`{"name": "gamma", "schedule": "0 2 * * *", "enabled": false, "http": {"url": "https://reports.internal/c"}}`,
	} {
		res := a.do("POST", "/v1/jobs", def, nil)
		require.Equal(t, http.StatusCreated, res.Status, "%s", res.Body)
	}
	testdb.AddRunDays(t, a.db.Pool, time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(2025, 1, 2, 0, 0, 0, 0, time.UTC))
	at := func(n int) time.Time { return time.Date(2025, 1, 1, 2, n, 0, 0, time.UTC) }
	a.insertRuns(
		storetest.RunOpts{Job: "alpha", Status: store.StatusSucceeded, ScheduledAt: at(1), StartedAt: at(1), FinishedAt: at(1)},
		storetest.RunOpts{Job: "alpha", Status: store.StatusFailed, ScheduledAt: at(2), StartedAt: at(2), FinishedAt: at(2)},
		storetest.RunOpts{Job: "beta", Status: store.StatusRunning, ScheduledAt: at(3), StartedAt: at(3)},
		storetest.RunOpts{Job: "plan-change", Status: store.StatusSucceeded, ScheduledAt: at(4), StartedAt: at(4), FinishedAt: at(4)})
	res := a.do("POST", "/v1/jobs/beta/pause", "", nil)
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)

	res = a.do("GET", "/v1/jobs?counts=true", "", nil)
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	assert.Equal(t, map[string]any{"total": 6.0, "failing": 1.0, "running": 1.0, "paused": 1.0, "disabled": 2.0, "matched": 6.0},
		res.JSON(t)["counts"], "rounds-create, plan-change, status-sync (disabled) and the three runtime jobs")
	assert.NotContains(t, a.do("GET", "/v1/jobs", "", nil).JSON(t), "counts", "counts only when asked")

	for query, want := range map[string][]string{
		"status=failing":             {"alpha"},
		"status=running":             {"beta"},
		"status=paused":              {"beta"},
		"status=disabled":            {"status-sync", "gamma"},
		"kind=builtin":               {"rounds-create", "plan-change", "status-sync"},
		"kind=http&label=team=ops":   {"beta"},
		"label=team":                 {"alpha", "beta"},
		"label=team&label=tier=1":    {"beta"},
		"q=REPORTS.internal/a":       {"alpha"},
		"q=http+team=billing":        {"alpha"},
		"kind=http&limit=1":          {"alpha", "beta", "gamma"},
		"status=failing&kind=sql":    nil,
		"q=built-in+plan&limit=1":    {"plan-change"},
		"label=team&limit=1&counts=": {"alpha", "beta"},
	} {
		assert.Equal(t, want, a.jobNames("/v1/jobs?"+query), query)
	}

	res = a.do("GET", "/v1/jobs?kind=http&limit=2&counts=true", "", nil)
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	body := res.JSON(t)
	assert.Equal(t, []any{"alpha", "beta"}, pluck(body["jobs"], "name"))
	assert.Equal(t, 3.0, body["counts"].(map[string]any)["matched"])
	assert.Equal(t, 6.0, body["counts"].(map[string]any)["total"], "the namespace's, whatever the filters")

	// Every wrong parameter in one answer.
	res = a.do("GET", "/v1/jobs?status=broken&kind=shell&label==x&counts=yes&limit=0&cursor=zz", "", nil)
	require.Equal(t, http.StatusBadRequest, res.Status, "%s", res.Body)
	var fields []any
	for _, e := range res.JSON(t)["errors"].([]any) {
		fields = append(fields, e.(map[string]any)["field"])
	}
	assert.ElementsMatch(t, []any{"status", "kind", "label", "counts", "limit", "cursor"}, fields)
	assert.Equal(t, "invalid-request", res.problemType(t))
	assert.Contains(t, res.JSON(t)["detail"], "status must be one of failing, running, paused, disabled")
	res = a.do("GET", "/v1/jobs?cursor=zz", "", nil)
	assert.Equal(t, "invalid-cursor", res.problemType(t), "a bad cursor alone keeps its type")
}

// TestJobCountsStayInTheirNamespace: the attack on the counts. A namespace's viewer or
// another namespace's editor asking for the counts or a filtered list of a namespace it
// may not read is refused before anything is counted, and a namespace parameter cannot
// widen a list it may read to another namespace.
func TestJobCountsStayInTheirNamespace(t *testing.T) {
	tm := newTeam(t)
	for _, c := range []struct{ who, path string }{
		{"billing-viewer", "/v1/namespaces/ops/jobs?counts=true"},
		{"billing-viewer", "/v1/namespaces/ops/jobs?status=running"},
		{"billing-viewer", "/v1/jobs?counts=true"},
		{"billing-editor", "/v1/jobs?status=failing&counts=true"},
		{"ops-editor", "/v1/namespaces/billing/jobs?counts=true&label=team"},
	} {
		res := tm.as(c.who, "GET", c.path, "")
		assert.Equal(t, http.StatusForbidden, res.Status, "%s as %s: %s", c.path, c.who, res.Body)
		assert.NotContains(t, string(res.Body), "counts", "%s as %s", c.path, c.who)
		assert.NotContains(t, string(res.Body), "report", "%s as %s", c.path, c.who)
	}

	res := tm.as("billing-viewer", "GET", "/v1/namespaces/billing/jobs?counts=true&namespace=ops", "")
	require.Equal(t, http.StatusBadRequest, res.Status, "%s", res.Body)
	assert.Equal(t, "namespace", res.problemField(t))

	res = tm.as("billing-viewer", "GET", "/v1/namespaces/billing/jobs?counts=true", "")
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	assert.Equal(t, map[string]any{"total": 1.0, "failing": 0.0, "running": 1.0, "paused": 0.0, "disabled": 0.0, "matched": 1.0},
		res.JSON(t)["counts"], "billing's one job, its manual run queued; nothing of ops or default")
}

// TestEveryNamespacesJobs: an admin lists every namespace's jobs with ?namespace=*, each with
// its namespace, filtered by state across teams, paged, and counted per namespace; anyone
// else is refused with what its token may read.
func TestEveryNamespacesJobs(t *testing.T) {
	tm := newTeam(t) // billing/report and ops/report, each with a run queued
	a := tm.testAPI
	res := a.do("POST", "/v1/namespaces/billing/jobs", string(httpJob("export")), nil)
	require.Equal(t, http.StatusCreated, res.Status, "%s", res.Body)
	res = a.do("POST", "/v1/namespaces/ops/jobs/report/pause", "", nil)
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	a.exec(`UPDATE job_runs SET status = 'failed', started_at = now(), finished_at = now() WHERE job = 'billing/report'`)

	keys := func(path string) []string {
		var out []string
		for {
			res := a.do("GET", path, "", nil)
			require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
			body := res.JSON(t)
			for _, j := range body["jobs"].([]any) {
				m := j.(map[string]any)
				out = append(out, m["namespace"].(string)+"/"+m["name"].(string))
			}
			next, _ := body["next_cursor"].(string)
			if next == "" {
				return out
			}
			base, _, _ := strings.Cut(path, "&cursor=")
			path = base + "&cursor=" + next
		}
	}
	every := []string{"default/rounds-create", "default/plan-change", "default/status-sync",
		"billing/export", "billing/report", "ops/report"}
	for query, want := range map[string][]string{
		"":                          every,
		"&limit=1":                  every,
		"&limit=2":                  every,
		"&status=failing":           {"billing/report"},
		"&status=paused":            {"ops/report"},
		"&status=running":           {"ops/report"},
		"&status=running&limit=1":   {"ops/report"},
		"&q=report&limit=1":         {"billing/report", "ops/report"},
		"&status=disabled&counts=1": nil, // counts must be true or false
	} {
		if strings.Contains(query, "counts=1") {
			res := a.do("GET", "/v1/jobs?namespace=*"+query, "", nil)
			assert.Equal(t, http.StatusBadRequest, res.Status, "%s", res.Body)
			continue
		}
		assert.Equal(t, want, keys("/v1/jobs?namespace=*"+query), query)
	}

	res = a.do("GET", "/v1/jobs?namespace=*&counts=true&status=failing", "", nil)
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	body := res.JSON(t)
	assert.Equal(t, map[string]any{"total": 6.0, "failing": 1.0, "running": 1.0, "paused": 1.0, "disabled": 1.0, "matched": 1.0}, body["counts"])
	assert.Equal(t, []any{
		map[string]any{"namespace": "billing", "total": 2.0, "failing": 1.0, "running": 0.0, "paused": 0.0, "disabled": 0.0, "matched": 1.0},
		map[string]any{"namespace": "default", "total": 3.0, "failing": 0.0, "running": 0.0, "paused": 0.0, "disabled": 1.0, "matched": 0.0},
		map[string]any{"namespace": "ops", "total": 1.0, "failing": 0.0, "running": 1.0, "paused": 1.0, "disabled": 0.0, "matched": 0.0},
	}, body["namespace_counts"])

	// Only an admin; the others are told what they may read instead.
	for _, who := range []string{"read-all", "billing-viewer", "ops-editor"} {
		res := tm.as(who, "GET", "/v1/jobs?namespace=*", "")
		require.Equal(t, http.StatusForbidden, res.Status, "%s: %s", who, res.Body)
		assert.Contains(t, res.JSON(t)["detail"], "only an admin may", who)
	}
	res = tm.as("billing-viewer", "GET", "/v1/jobs?namespace=*", "")
	assert.Contains(t, res.JSON(t)["detail"], "GET /v1/namespaces/billing/jobs", "the namespace it may read")
	assert.NotContains(t, res.JSON(t)["detail"], "ops")

	// Another value, or the wildcard on a namespace's own route, is a 400 that says where to look.
	for _, path := range []string{"/v1/jobs?namespace=ops", "/v1/namespaces/ops/jobs?namespace=*"} {
		res := a.do("GET", path, "", nil)
		require.Equal(t, http.StatusBadRequest, res.Status, "%s: %s", path, res.Body)
		assert.Equal(t, "namespace", res.problemField(t), path)
	}
}
