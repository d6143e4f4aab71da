package api

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A completion received by any replica's API (not the leader's finisher) records the events
// the job's rules want in its own transaction, as the finisher does: failed, then paused
// when the failures reach pause_after_failures, then recovered at the next success.
func TestCallbackCompletionRecordsNotificationEvents(t *testing.T) {
	a := newRuntimeAPI(t, 0)
	res := a.do("POST", "/v1/jobs", `{"name": "cb", "schedule": "0 2 * * *", "pause_after_failures": 2,
		"http": {"url": "https://billing.internal/x", "completion": "callback"},
		"notify": [{"on": ["failed", "recovered", "paused"], "webhook": {"url": "https://alerts.example.com/hook"}}]}`, nil)
	require.Equal(t, http.StatusCreated, res.Status, "%s", res.Body)
	complete := func(token, status string) int64 {
		t.Helper()
		id := a.callbackRun("cb", token)
		res := a.do(http.MethodPost, "/v1/runs/"+jsonInt(id)+"/complete", `{"status": "`+status+`"}`, header{"Authorization": "Bearer " + token})
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
		return id
	}
	events := func(event string) int {
		return a.count(`SELECT count(*) FROM scheduler_notifications WHERE job = 'cb' AND event = $1`, event)
	}

	first := complete("schcb_one", "failed")
	assert.Equal(t, 1, a.count(`SELECT count(*) FROM scheduler_notifications WHERE job = 'cb' AND event = 'failed' AND run_id = $1 AND status = 'failed'`, first))
	assert.Zero(t, events("paused"))
	complete("schcb_two", "failed")
	assert.Equal(t, 2, events("failed"))
	assert.Equal(t, 1, events("paused"), "the second failure paused the job, and said so")
	assert.Equal(t, 1, a.count(`SELECT count(*) FROM scheduler_notifications WHERE job = 'cb' AND event = 'paused' AND detail LIKE 'paused after 2 failed runs%'`))

	a.do("POST", "/v1/jobs/cb/resume", "", nil)
	ok := complete("schcb_three", "succeeded")
	assert.Equal(t, 1, a.count(`SELECT count(*) FROM scheduler_notifications WHERE job = 'cb' AND event = 'recovered' AND run_id = $1`, ok))
	complete("schcb_four", "succeeded")
	assert.Equal(t, 1, events("recovered"), "only the first success after a failure recovers")

	// A job whose rules want none of them records nothing.
	res = a.do("POST", "/v1/jobs", `{"name": "quiet", "schedule": "0 2 * * *",
		"http": {"url": "https://billing.internal/x", "completion": "callback"},
		"notify": [{"on": ["missed"], "webhook": {"url": "https://alerts.example.com/hook"}}]}`, nil)
	require.Equal(t, http.StatusCreated, res.Status, "%s", res.Body)
	id := a.callbackRun("quiet", "schcb_five")
	res = a.do(http.MethodPost, "/v1/runs/"+jsonInt(id)+"/complete", `{"status": "failed"}`, header{"Authorization": "Bearer schcb_five"})
	require.Equal(t, http.StatusOK, res.Status)
	assert.Zero(t, a.count(`SELECT count(*) FROM scheduler_notifications WHERE job = 'quiet'`))
}
