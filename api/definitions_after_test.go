package api

import (
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schedulerhq/scheduler/internal/store"
)

// after names every problem of a definition's parents at once, beside its other problems:
// a parent in another namespace, a missing one, the cycle it would close (named in run
// order), the job itself, and a bad timeout.
func TestAfterRefusalsListEveryProblem(t *testing.T) {
	t.Parallel()
	a := newRuntimeAPI(t, 0)
	for _, body := range []string{
		`{"name": "extract", "schedule": "@every 2s", "http": {"url": "https://etl.example/extract"}}`,
		`{"name": "transform", "after": ["extract"], "http": {"url": "https://etl.example/transform"}}`,
		`{"name": "load", "after": ["transform"], "http": {"url": "https://etl.example/load"}}`,
	} {
		res := a.do("POST", "/v1/jobs", body, nil)
		require.Equal(t, http.StatusCreated, res.Status, "body: %s", res.Body)
	}
	// load runs after transform after extract: extract after load would close the cycle
	// extract → transform → load → extract.
	res := a.do("PUT", "/v1/jobs/extract", `{"schedule": "@every 2s", "timeout": "forever",
		"after": ["load", "billing/invoices", "gone"], "http": {"url": "https://etl.example/extract"}}`, nil)
	require.Equal(t, http.StatusUnprocessableEntity, res.Status, "body: %s", res.Body)
	assert.Equal(t, "invalid-definition", res.problemType(t))
	got := map[string]string{}
	for _, e := range res.JSON(t)["errors"].([]any) {
		got[e.(map[string]any)["field"].(string)] = e.(map[string]any)["detail"].(string)
	}
	assert.Contains(t, got["timeout"], "forever")
	assert.Contains(t, got["after[1]"], "another namespace")
	assert.Len(t, got, 2, "the graph is checked once the names are right: %v", got)

	res = a.do("PUT", "/v1/jobs/extract", `{"schedule": "@every 2s", "timeout": "forever",
		"after": ["load", "gone"], "http": {"url": "https://etl.example/extract"}}`, nil)
	require.Equal(t, http.StatusUnprocessableEntity, res.Status, "body: %s", res.Body)
	got = map[string]string{}
	for _, e := range res.JSON(t)["errors"].([]any) {
		got[e.(map[string]any)["field"].(string)] = e.(map[string]any)["detail"].(string)
	}
	assert.Contains(t, got["timeout"], "forever")
	assert.Contains(t, got["after[0]"], "cycle: extract → transform → load → extract")
	assert.Contains(t, got["after[1]"], `no job "gone" in namespace default`)
	assert.Len(t, got, 3)
	assert.Equal(t, 3, a.count(`SELECT count(*) FROM job_definitions`))
	assert.Equal(t, 1, a.count(`SELECT count(*) FROM job_definitions WHERE name = 'extract' AND version = 1`))
}

// Two writes that would close a cycle only together: the second to commit sees the first
// and is refused, whichever it is.
func TestAfterConcurrentWritesCannotCloseACycle(t *testing.T) {
	t.Parallel()
	a := newRuntimeAPI(t, 0)
	for _, name := range []string{"a", "b"} {
		res := a.do("POST", "/v1/jobs", `{"name": "`+name+`", "schedule": "@every 1m", "http": {"url": "https://etl.example/x"}}`, nil)
		require.Equal(t, http.StatusCreated, res.Status, "body: %s", res.Body)
	}
	for round := range 10 {
		var wg sync.WaitGroup
		statuses := make([]int, 2)
		for i, pair := range [][2]string{{"a", "b"}, {"b", "a"}} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				statuses[i] = a.do("PUT", "/v1/jobs/"+pair[0], `{"schedule": "@every 1m", "after": ["`+pair[1]+`"], "http": {"url": "https://etl.example/x"}}`, nil).Status
			}()
		}
		wg.Wait()
		assert.ElementsMatch(t, []int{http.StatusOK, http.StatusUnprocessableEntity}, statuses, "round %d", round)
		assert.Equal(t, 1, a.count(`SELECT count(*) FROM job_definitions WHERE after_keys IS NOT NULL`), "round %d", round)
		for _, name := range []string{"a", "b"} {
			res := a.do("PUT", "/v1/jobs/"+name, `{"schedule": "@every 1m", "http": {"url": "https://etl.example/x"}}`, nil)
			require.Equal(t, http.StatusOK, res.Status, "body: %s", res.Body)
		}
	}
}

// A parent is deleted only when forced, with a reason, audited; its children keep naming it.
func TestDeleteParentNeedsForceAndReason(t *testing.T) {
	t.Parallel()
	a := newRuntimeAPI(t, 0)
	for _, body := range []string{
		`{"name": "extract", "schedule": "@every 2s", "http": {"url": "https://etl.example/extract"}}`,
		`{"name": "transform", "after": ["extract"], "http": {"url": "https://etl.example/transform"}}`,
	} {
		res := a.do("POST", "/v1/jobs", body, nil)
		require.Equal(t, http.StatusCreated, res.Status, "body: %s", res.Body)
	}
	res := a.do("DELETE", "/v1/jobs/extract", "", nil)
	require.Equal(t, http.StatusConflict, res.Status, "body: %s", res.Body)
	assert.Equal(t, "job-has-children", res.problemType(t))
	assert.Contains(t, res.JSON(t)["detail"], "transform")

	res = a.do("DELETE", "/v1/jobs/extract?force=true", "", nil)
	require.Equal(t, http.StatusBadRequest, res.Status, "body: %s", res.Body)
	assert.Equal(t, "X-Reason", res.problemField(t))
	assert.Equal(t, 1, a.count(`SELECT count(*) FROM job_definitions WHERE name = 'extract'`))

	res = a.do("DELETE", "/v1/jobs/extract?force=true", "", header{"X-Reason": "extract%20replaced"})
	require.Equal(t, http.StatusNoContent, res.Status, "body: %s", res.Body)
	assert.Equal(t, 1, a.count(`SELECT count(*) FROM operator_actions WHERE action = 'delete' AND job = 'extract' AND reason = 'extract replaced'`))
	assert.Equal(t, 1, a.count(`SELECT count(*) FROM job_definitions WHERE name = 'transform' AND after_keys = '{extract}'`))
}

// A job's view lists its parents and children; a run's view links the runs it came from and
// the runs it caused; a child's slots from its parents are pending until they decide them.
func TestAfterViewsLinkParentsAndChildren(t *testing.T) {
	t.Parallel()
	a := newRuntimeAPI(t, 0)
	for _, body := range []string{
		`{"name": "extract", "schedule": "@every 1h", "http": {"url": "https://etl.example/extract"}}`,
		`{"name": "transform", "after": ["extract"], "http": {"url": "https://etl.example/transform"}}`,
	} {
		res := a.do("POST", "/v1/jobs", body, nil)
		require.Equal(t, http.StatusCreated, res.Status, "body: %s", res.Body)
	}
	res := a.do("GET", "/v1/jobs/extract", "", nil)
	require.Equal(t, http.StatusOK, res.Status, "body: %s", res.Body)
	assert.Equal(t, []any{"transform"}, res.JSON(t)["children"])
	res = a.do("GET", "/v1/jobs/transform", "", nil)
	require.Equal(t, http.StatusOK, res.Status, "body: %s", res.Body)
	job := res.JSON(t)
	assert.Equal(t, []any{"extract"}, job["after"])
	assert.Equal(t, "", job["schedule"])
	assert.Equal(t, "after extract", job["schedule_text"])
	assert.Empty(t, job["next_runs"])

	// extract's slot an hour ago ran and succeeded: transform's run of it is queued.
	a.exec(`UPDATE scheduler_leader SET epoch = 1`)
	a.exec(`INSERT INTO job_runs (id, job, trigger, status, scheduled_at, started_at, epoch)
		VALUES (job_run_id(date_trunc('hour', now()) - interval '1 hour'), 'extract', 'schedule', 'running',
		        date_trunc('hour', now()) - interval '1 hour', now(), 1)`)
	var parent, child int64
	require.NoError(t, a.db.Pool.QueryRow(t.Context(), `SELECT id FROM job_runs WHERE job = 'extract'`).Scan(&parent))
	require.NoError(t, a.db.Fenced(t.Context(), store.Fence{Epoch: 1}, func(tx *store.Tx) error {
		return tx.FinishRun(t.Context(), parent, store.StatusSucceeded, nil, nil, nil)
	}))
	require.NoError(t, a.db.Pool.QueryRow(t.Context(), `SELECT id FROM job_runs WHERE job = 'transform'`).Scan(&child))
	res = a.do("GET", fmt.Sprintf("/v1/runs/%d", parent), "", nil)
	require.Equal(t, http.StatusOK, res.Status, "body: %s", res.Body)
	assert.Equal(t, []any{float64(child)}, res.JSON(t)["caused_run_ids"])
	res = a.do("GET", fmt.Sprintf("/v1/runs/%d", child), "", nil)
	require.Equal(t, http.StatusOK, res.Status, "body: %s", res.Body)
	assert.Equal(t, []any{float64(parent)}, res.JSON(t)["parent_run_ids"])
	assert.Equal(t, "after", res.JSON(t)["trigger"])

	// extract missed the slot before: none of transform's.
	a.exec(`INSERT INTO job_runs (id, job, trigger, status, scheduled_at, finished_at)
		VALUES (job_run_id(date_trunc('hour', now()) - interval '2 hours'), 'extract', 'schedule', 'missed',
		        date_trunc('hour', now()) - interval '2 hours', now())`)

	// transform's slots: the one its parent decided (queued), and extract's next slots,
	// pending.
	res = a.do("GET", "/v1/jobs/transform/slots?until="+time.Now().Add(3*time.Hour).UTC().Format(time.RFC3339), "", nil)
	require.Equal(t, http.StatusOK, res.Status, "body: %s", res.Body)
	counts := res.JSON(t)["counts"].(map[string]any)
	assert.Equal(t, float64(1), counts["queued"])
	assert.GreaterOrEqual(t, counts["pending"], float64(3))
	assert.NotContains(t, counts, "unrecorded")
	missed := time.Now().UTC().Truncate(time.Hour).Add(-2 * time.Hour).Format(time.RFC3339)
	for _, sl := range res.JSON(t)["slots"].([]any) {
		assert.NotEqual(t, missed, sl.(map[string]any)["scheduled_at"], "a slot the parent missed is none of the child's")
	}
}
