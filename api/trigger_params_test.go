package api

import (
	"encoding/json"
	"maps"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/schedulerhq/scheduler/internal/store"
	"github.com/schedulerhq/scheduler/internal/store/storetest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A trigger's inputs are checked like a definition: every wrong member at once, none of the
// scheduler's own headers, each kind of input only for the job that reads it; good ones are
// kept on the run and in the audit row.
func TestTriggerParamsAreCheckedAndKept(t *testing.T) {
	t.Parallel()
	a := newRuntimeAPI(t, 0)
	require.Equal(t, http.StatusCreated, a.do("POST", "/v1/jobs", string(httpJob("hook")), nil).Status)
	require.Equal(t, http.StatusCreated, a.do("POST", "/v1/jobs",
		`{"name": "refresh", "schedule": "0 2 * * *", "sql": {"target": "APP", "statements": "SELECT current_setting('scheduler.var.day')"}}`, nil).Status)

	res := a.do("POST", "/v1/jobs/hook/runs", `{"params": {"vars": {"day": "x"}, "headers": {"Idempotency-Key": "forged",
		"X-Scheduler-Run-Id": "1", "authorization": "Bearer x", "X-Bad Name": "v", "X-Ok": "a\nb"}}}`, nil)
	require.Equal(t, http.StatusUnprocessableEntity, res.Status, "%s", res.Body)
	var fields []string
	for _, e := range res.JSON(t)["errors"].([]any) {
		fields = append(fields, e.(map[string]any)["field"].(string))
	}
	assert.ElementsMatch(t, []string{"params.vars", "params.headers.Idempotency-Key", "params.headers.X-Scheduler-Run-Id",
		"params.headers.authorization", "params.headers.X-Bad Name", "params.headers.X-Ok"}, fields)

	res = a.do("POST", "/v1/jobs/refresh/runs", `{"params": {"body": "{}", "vars": {"Day": "x"}}}`, nil)
	require.Equal(t, http.StatusUnprocessableEntity, res.Status, "%s", res.Body)
	assert.Len(t, res.JSON(t)["errors"], 2, "%s", res.Body)

	res = a.do("POST", "/v1/jobs/refresh/runs", `{"reason": "redo the 24th", "params": {"vars": {"day": "2026-11-24"}}}`, nil)
	require.Equal(t, http.StatusAccepted, res.Status, "%s", res.Body)
	assert.Equal(t, map[string]any{"vars": map[string]any{"day": "2026-11-24"}}, res.JSON(t)["params"])
	row := a.do("GET", "/v1/audit", "", nil).JSON(t)["actions"].([]any)[0].(map[string]any)
	assert.Equal(t, "trigger", row["action"])
	assert.Equal(t, map[string]any{"params": map[string]any{"vars": map[string]any{"day": "2026-11-24"}}}, row["detail"])
}

// A dry run is not the job's last run: it would hide the failure of the real one before it.
func TestDryRunIsNotTheLastRun(t *testing.T) {
	t.Parallel()
	a := newRuntimeAPI(t, 0)
	require.Equal(t, http.StatusCreated, a.do("POST", "/v1/jobs", string(httpJob("hook")), nil).Status)
	now := time.Now()
	failed := a.insertRun(storetest.RunOpts{Job: "hook", Status: store.StatusFailed, StartedAt: now, FinishedAt: now,
		Error: "target down"})
	a.insertRun(storetest.RunOpts{Job: "hook", Status: store.StatusSucceeded, StartedAt: now, FinishedAt: now,
		Params: json.RawMessage(`{"dry_run": true}`)})
	last := a.do("GET", "/v1/jobs/hook", "", nil).JSON(t)["last_run"].(map[string]any)
	assert.Equal(t, float64(failed), last["id"])
	assert.Equal(t, "failed", last["status"])
}

// TestTriggerParamsRefuseBadBytes: bytes PostgreSQL cannot store (NUL) and bytes no HTTP
// call can carry (control characters in a header) are the caller's mistake: 422 listing
// every one, reason included, never a 503 or a run whose every attempt fails.
func TestTriggerParamsRefuseBadBytes(t *testing.T) {
	t.Parallel()
	a := newRuntimeAPI(t, 0)
	require.Equal(t, http.StatusCreated, a.do("POST", "/v1/jobs", string(httpJob("hook")), nil).Status)
	require.Equal(t, http.StatusCreated, a.do("POST", "/v1/jobs",
		`{"name": "refresh", "schedule": "0 2 * * *", "sql": {"target": "APP", "statements": "SELECT 1"}}`, nil).Status)

	res := a.do("POST", "/v1/jobs/hook/runs", `{"reason": "a\u0000b", "params": {"body": "{\"a\": \"\u0000\"}",
		"headers": {"X-A": "a\u0001b", "X-B\u0007": "v", "X-C": "\u007f", "X-D": "tab\tand café are fine", "X\u0000": "v"}}}`, nil)
	require.Equal(t, http.StatusUnprocessableEntity, res.Status, "%s", res.Body)
	got := map[string]string{}
	for _, e := range res.JSON(t)["errors"].([]any) {
		got[e.(map[string]any)["field"].(string)] = e.(map[string]any)["detail"].(string)
	}
	assert.ElementsMatch(t, []string{"reason", "params.body", "params.headers.X-A", "params.headers.X-B\a", "params.headers.X-C", "params.headers.X\x00"},
		slices.Collect(maps.Keys(got)), "%s", res.Body)
	assert.Contains(t, got["params.body"], "NUL")
	assert.Contains(t, got["params.headers.X-A"], "U+0001")
	assert.Contains(t, got["params.headers.X-B\a"], "RFC 9110 token")

	res = a.do("POST", "/v1/jobs/refresh/runs", `{"params": {"vars": {"day": "\u0000"}}}`, nil)
	require.Equal(t, http.StatusUnprocessableEntity, res.Status, "%s", res.Body)
	assert.Equal(t, "params.vars.day", res.problemField(t))

	res = a.do("POST", "/v1/jobs/hook/runs", `{"params": {"body": "ünïcode\ttext", "headers": {"X-D": "tab\tand café"}}}`, nil)
	assert.Equal(t, http.StatusAccepted, res.Status, "%s", res.Body)
}
