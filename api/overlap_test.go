package api

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A runtime job with overlap allow and max_concurrent: created and shown as written; manual
// triggers queue runs up to the bound, then answer 200 with an active run; a definition
// that misuses max_concurrent gets every problem back at once.
func TestOverlapAllowThroughTheAPI(t *testing.T) {
	t.Parallel()
	a := newRuntimeAPI(t, 0)
	res := a.do("POST", "/v1/jobs", `{"name": "fan", "schedule": "0 2 * * *", "overlap": "allow", "max_concurrent": 2,
		"http": {"url": "https://billing.internal/fan"}}`, nil)
	require.Equal(t, http.StatusCreated, res.Status, "body: %s", res.Body)
	job := res.JSON(t)
	assert.Equal(t, "allow", job["overlap"])
	assert.Equal(t, float64(2), job["definition"].(map[string]any)["max_concurrent"])

	for i, want := range []int{http.StatusAccepted, http.StatusAccepted, http.StatusOK, http.StatusOK} {
		res := a.do("POST", "/v1/jobs/fan/runs", "", nil)
		assert.Equal(t, want, res.Status, "trigger %d: %s", i+1, res.Body)
	}
	assert.Equal(t, 2, a.count(`SELECT count(*) FROM job_runs WHERE job = 'fan' AND status = 'queued'`))

	res = a.do("POST", "/v1/jobs", `{"name": "Bad", "schedule": "0 2 * * *", "overlap": "replace", "max_concurrent": 2,
		"timeout": "forever", "http": {"url": "https://billing.internal/x"}}`, nil)
	require.Equal(t, http.StatusUnprocessableEntity, res.Status, "body: %s", res.Body)
	var fields []string
	for _, e := range res.JSON(t)["errors"].([]any) {
		fields = append(fields, e.(map[string]any)["field"].(string))
	}
	assert.ElementsMatch(t, []string{"name", "timeout", "max_concurrent"}, fields)
	res = a.do("POST", "/v1/jobs", `{"name": "wide", "schedule": "0 2 * * *", "overlap": "allow", "max_concurrent": 500,
		"http": {"url": "https://billing.internal/x"}}`, nil)
	require.Equal(t, http.StatusUnprocessableEntity, res.Status)
	assert.Equal(t, "max_concurrent", res.problemField(t))
}
