package api

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schedulerhq/scheduler/internal/store"
	"github.com/schedulerhq/scheduler/internal/store/storetest"
)

// seedHistory inserts n finished runs of job with statuses and triggers cycling, created one
// minute apart from 2025-01-01T00:00:00Z, with the ids of their days (that of the slot is
// required of a slot row; a manual run gets that of its creation, so that ids follow it).
func (a *testAPI) seedHistory(job string, n int) {
	start := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	triggers := []string{store.TriggerSchedule, store.TriggerManual, store.TriggerCatchUp}
	statuses := []string{store.StatusSucceeded, store.StatusFailed, store.StatusSkipped, store.StatusTimedOut}
	runs := make([]storetest.RunOpts, n)
	for i := range runs {
		ts := start.Add(time.Duration(i) * time.Minute)
		runs[i] = storetest.RunOpts{Job: job, Trigger: triggers[i%3], Status: statuses[i%4],
			CreatedAt: ts, StartedAt: ts, FinishedAt: ts.Add(2 * time.Second)}
		if i%3 != 1 {
			runs[i].ScheduledAt = ts
		}
	}
	a.insertRuns(runs...)
}

// walk pages through a history query and returns the ids in the order seen.
func (a *testAPI) walk(job string, q url.Values) []int64 {
	a.t.Helper()
	var ids []int64
	for page := 0; ; page++ {
		require.Less(a.t, page, 1000, "the walk does not end")
		res := a.do("GET", "/v1/jobs/"+job+"/runs?"+q.Encode(), "", nil)
		require.Equal(a.t, http.StatusOK, res.Status, "body: %s", res.Body)
		body := res.JSON(a.t)
		for _, r := range body["runs"].([]any) {
			ids = append(ids, int64(r.(map[string]any)["id"].(float64)))
		}
		next, _ := body["next_cursor"].(string)
		if next == "" {
			require.Nil(a.t, body["next_cursor"])
			return ids
		}
		q.Set("cursor", next)
	}
}

func (a *testAPI) ids(sql string, args ...any) []int64 {
	a.t.Helper()
	rows, err := a.db.Pool.Query(context.Background(), sql, args...)
	require.NoError(a.t, err)
	defer rows.Close()
	var ids []int64
	for rows.Next() {
		var id int64
		require.NoError(a.t, rows.Scan(&id))
		ids = append(ids, id)
	}
	require.NoError(a.t, rows.Err())
	return ids
}

func TestHistoryPagesWalkEveryRunOnce(t *testing.T) {
	t.Parallel()
	a := newTestAPI(t)
	a.seedHistory("plan-change", 403)
	a.seedHistory("rounds-create", 50) // another job's runs never show

	cases := []struct {
		query url.Values
		sql   string
		args  []any
	}{
		{url.Values{"limit": {"7"}}, `job = 'plan-change'`, nil},
		{url.Values{}, `job = 'plan-change'`, nil},
		{url.Values{"limit": {"500"}}, `job = 'plan-change'`, nil},
		{url.Values{"status": {"failed"}, "limit": {"9"}}, `job = 'plan-change' AND status = 'failed'`, nil},
		{url.Values{"trigger": {"catch-up"}, "limit": {"10"}}, `job = 'plan-change' AND trigger = 'catch-up'`, nil},
		{url.Values{"status": {"skipped"}, "trigger": {"manual"}, "limit": {"4"}}, `job = 'plan-change' AND status = 'skipped' AND trigger = 'manual'`, nil},
		{url.Values{"since": {"2025-01-01T01:00:00Z"}, "until": {"2025-01-01T03:00:00+00:00"}, "limit": {"11"}},
			`job = 'plan-change' AND created_at >= '2025-01-01T01:00:00Z' AND created_at < '2025-01-01T03:00:00Z'`, nil},
		{url.Values{"status": {"succeeded"}, "since": {"2025-01-01T02:00:00.5Z"}, "limit": {"3"}},
			`job = 'plan-change' AND status = 'succeeded' AND created_at >= '2025-01-01T02:00:00.5Z'`, nil},
		{url.Values{"status": {"missed"}}, `false`, nil},
		// Re-runs and backfills are filtered as any other trigger (the console's history does).
		{url.Values{"trigger": {"rerun"}}, `job = 'plan-change' AND trigger = 'rerun'`, nil},
		{url.Values{"trigger": {"backfill"}}, `job = 'plan-change' AND trigger = 'backfill'`, nil},
	}
	for _, c := range cases {
		want := a.ids(`SELECT id FROM job_runs WHERE ` + c.sql + ` ORDER BY id DESC`)
		got := a.walk("plan-change", c.query)
		assert.Equal(t, want, got, "query %v", c.query)
		if len(want) > 0 {
			assert.NotEmpty(t, got)
		}
	}
}

func TestHistoryRefusesBadQueries(t *testing.T) {
	t.Parallel()
	a := newTestAPI(t)
	a.seedHistory("plan-change", 5)
	res := a.do("GET", "/v1/jobs/plan-change/runs?limit=2", "", nil)
	require.Equal(t, http.StatusOK, res.Status)
	cursor, _ := res.JSON(t)["next_cursor"].(string)
	require.NotEmpty(t, cursor)

	cases := []struct{ query, problem, field string }{
		{"limit=0", "invalid-request", "limit"},
		{"limit=501", "invalid-request", "limit"},
		{"limit=ten", "invalid-request", "limit"},
		{"status=done", "invalid-request", "status"},
		{"trigger=cron", "invalid-request", "trigger"},
		{"since=yesterday", "invalid-request", "since"},
		{"until=2025-01-01", "invalid-request", "until"},
		{"since=2025-02-01T00:00:00Z&until=2025-01-01T00:00:00Z", "invalid-request", "since"}, // an empty range is a mistake
		{"cursor=bm9wZQ", "invalid-cursor", "cursor"},
		{"cursor=" + url.QueryEscape(cursor) + "&status=failed", "invalid-cursor", "cursor"}, // another query's cursor
		{"cursor=" + url.QueryEscape(encodeCursor(-5, "x")), "invalid-cursor", "cursor"},
	}
	for _, c := range cases {
		res := a.do("GET", "/v1/jobs/plan-change/runs?"+c.query, "", nil)
		require.Equal(t, http.StatusBadRequest, res.Status, "%s: %s", c.query, res.Body)
		assert.Equal(t, c.problem, res.problemType(t), c.query)
		assert.Equal(t, c.field, res.problemField(t), c.query)
	}
	res = a.do("GET", "/v1/jobs/nope/runs", "", nil)
	assert.Equal(t, http.StatusNotFound, res.Status)
	assert.Equal(t, "job-not-found", res.problemType(t))
}

// A query string that does not decode is refused, naming the parameter, rather than read
// as if the parameter were absent (url.Values drops such a pair silently).
func TestMalformedQueryIsRefused(t *testing.T) {
	t.Parallel()
	a := newTestAPI(t)
	cases := []struct{ method, path, field string }{
		{"GET", "/v1/jobs/plan-change/runs?cursor=%%%x", "cursor"},
		{"GET", "/v1/jobs/plan-change/runs?limit=2&status=%zz", "status"},
		{"GET", "/v1/jobs/plan-change/runs?%zz=1", "%zz"},
		{"POST", "/v1/jobs/plan-change/runs?wait=1%", "wait"},
		{"GET", "/v1/audit?cursor=%%%x", "cursor"},
		{"GET", "/v1/jobs/plan-change/runs?limit=1;status=failed", "limit"}, // ; is not a separator
	}
	for _, c := range cases {
		res := a.do(c.method, c.path, "", nil)
		require.Equal(t, http.StatusBadRequest, res.Status, "%s: %s", c.path, res.Body)
		assert.Equal(t, "invalid-request", res.problemType(t), c.path)
		assert.Equal(t, c.field, res.problemField(t), c.path)
	}
	assert.Zero(t, a.count(`SELECT count(*) FROM job_runs`), "a refused trigger queues nothing")
}

func TestGetRun(t *testing.T) {
	t.Parallel()
	a := newTestAPI(t)
	res := a.do("POST", "/v1/jobs/plan-change/runs", `{"reason":"look"}`, nil)
	require.Equal(t, http.StatusAccepted, res.Status)
	created := res.JSON(t)

	res = a.do("GET", res.Header.Get("Location"), "", nil)
	require.Equal(t, http.StatusOK, res.Status)
	got := res.JSON(t)
	assert.Equal(t, []any{}, got["attempts"], "a built-in job's run has no call attempts, and says so")
	delete(got, "attempts")
	assert.Equal(t, created, got, "the run as the trigger answered it, with its attempts besides")

	res = a.do("GET", "/v1/runs/999999", "", nil)
	assert.Equal(t, http.StatusNotFound, res.Status)
	assert.Equal(t, "run-not-found", res.problemType(t))
	for _, bad := range []string{"abc", "0", "-1", "99999999999999999999"} {
		res = a.do("GET", "/v1/runs/"+bad, "", nil)
		assert.Equal(t, http.StatusBadRequest, res.Status, bad)
		assert.Equal(t, "id", res.problemField(t))
	}
}

func TestCancelRun(t *testing.T) {
	t.Parallel()
	a := newTestAPI(t)

	// Queued: cancelled at once.
	res := a.do("POST", "/v1/jobs/plan-change/runs", "", nil)
	require.Equal(t, http.StatusAccepted, res.Status)
	queued := int64(res.JSON(t)["id"].(float64))
	res = a.do("POST", fmt.Sprintf("/v1/runs/%d/cancel", queued), "", nil)
	require.Equal(t, http.StatusOK, res.Status, "body: %s", res.Body)
	assert.Equal(t, "cancelled", res.JSON(t)["status"])
	assert.NotNil(t, res.JSON(t)["finished_at"])
	assert.Equal(t, 1, a.count(`SELECT count(*) FROM job_runs WHERE id = $1 AND status = 'cancelled' AND finished_at IS NOT NULL`, queued))

	// Finished: nothing to cancel.
	res = a.do("POST", fmt.Sprintf("/v1/runs/%d/cancel", queued), "", nil)
	require.Equal(t, http.StatusConflict, res.Status)
	assert.Equal(t, "run-finished", res.problemType(t))

	// Running: the leader is asked (cancel_requested, which NOTIFYs it) and the answer is 202.
	res = a.do("POST", "/v1/jobs/plan-change/runs", "", nil)
	require.Equal(t, http.StatusAccepted, res.Status)
	running := int64(res.JSON(t)["id"].(float64))
	a.exec(`UPDATE job_runs SET status = 'running', started_at = now() WHERE id = $1`, running)
	listener, err := a.db.OpenListenSession(t.Context())
	require.NoError(t, err)
	defer listener.Close()
	require.NoError(t, listener.Listen(t.Context(), store.RunsChannel, true))
	res = a.do("POST", fmt.Sprintf("/v1/runs/%d/cancel", running), "", nil)
	require.Equal(t, http.StatusAccepted, res.Status)
	assert.Equal(t, true, res.JSON(t)["cancel_requested"])
	assert.Equal(t, "running", res.JSON(t)["status"])
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	_, payload, ok, err := listener.Wait(ctx)
	require.NoError(t, err)
	require.True(t, ok, "a notification arrived")
	assert.Equal(t, strconv.FormatInt(running, 10), payload)

	res = a.do("POST", "/v1/runs/424242/cancel", "", nil)
	assert.Equal(t, http.StatusNotFound, res.Status)
	assert.Equal(t, "run-not-found", res.problemType(t))
	res = a.do("POST", "/v1/runs/x/cancel", "", nil)
	assert.Equal(t, http.StatusBadRequest, res.Status)
}
