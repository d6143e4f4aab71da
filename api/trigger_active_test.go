package api

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestTriggerWithOtherParamsThanTheActiveRunIsRefused: a trigger whose params meet an
// active run with other params was answered 200 with that run, its inputs silently
// dropped. It is refused 409 with the active run's id and what to do; the same params (or
// none) still get the active run, and a refused Idempotency-Key stays unused.
func TestTriggerWithOtherParamsThanTheActiveRunIsRefused(t *testing.T) {
	t.Parallel()
	a := newRuntimeAPI(t, 0)
	require.Equal(t, http.StatusCreated, a.do("POST", "/v1/jobs", string(httpJob("hook")), nil).Status)

	res := a.do("POST", "/v1/jobs/hook/runs", `{"params": {"body": "a", "headers": {"X-Day": "24"}}}`, nil)
	require.Equal(t, http.StatusAccepted, res.Status, "%s", res.Body)
	active := int64(res.JSON(t)["id"].(float64))
	location := fmt.Sprintf("/v1/runs/%d", active)

	for _, body := range []string{`{"params": {"body": "b"}}`, `{"params": {"body": "a"}}`, `{"params": {"dry_run": true}}`,
		`{"reason": "again", "params": {"body": "a", "headers": {"X-Day": "25"}}}`} {
		res = a.do("POST", "/v1/jobs/hook/runs", body, nil)
		require.Equal(t, http.StatusConflict, res.Status, "%s: %s", body, res.Body)
		assert.Equal(t, "run-active", res.problemType(t))
		p := res.JSON(t)
		assert.Equal(t, float64(active), p["active_run_id"], "%s", res.Body)
		assert.Equal(t, location, res.Header.Get("Location"))
		assert.Contains(t, p["detail"], "cancel it")
		assert.Contains(t, p["detail"], `"overlap": "allow"`)
	}
	for _, body := range []string{`{"params": {"headers": {"X-Day": "24"}, "body": "a"}}`, `{}`, ``, `{"reason": "just run"}`} {
		res = a.do("POST", "/v1/jobs/hook/runs", body, nil)
		require.Equal(t, http.StatusOK, res.Status, "%s: %s", body, res.Body)
		assert.Equal(t, float64(active), res.JSON(t)["id"])
	}

	// With a key: refused, and nothing kept under it, so the same request once the run
	// has ended queues a run with these params.
	key := header{"Idempotency-Key": key1}
	res = a.do("POST", "/v1/jobs/hook/runs", `{"params": {"body": "b"}}`, key)
	require.Equal(t, http.StatusConflict, res.Status, "%s", res.Body)
	a.exec(`UPDATE job_runs SET status = 'succeeded', finished_at = now() WHERE id = $1`, active)
	res = a.do("POST", "/v1/jobs/hook/runs", `{"params": {"body": "b"}}`, key)
	require.Equal(t, http.StatusAccepted, res.Status, "%s", res.Body)
	assert.Equal(t, map[string]any{"body": "b"}, res.JSON(t)["params"])
}
