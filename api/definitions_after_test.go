package api

import (
	"net/http"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
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
