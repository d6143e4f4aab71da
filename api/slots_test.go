package api

import (
	"net/http"
	"testing"
	"time"

	"github.com/schedulerhq/scheduler/internal/store/storetest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestSlotsSayWhatBecameOfEachSlot: an hourly job created four and a half hours ago, whose slots ran,
// were skipped, missed, re-run, or left no row, and whose next slots are to come.
func TestSlotsSayWhatBecameOfEachSlot(t *testing.T) {
	t.Parallel()
	a := newRuntimeAPI(t, 0)
	require.Equal(t, http.StatusCreated, a.do("POST", "/v1/jobs", httpJob("hourly").replaceSchedule("0 * * * *"), nil).Status)
	now := time.Now().UTC()
	hour := now.Truncate(time.Hour)
	a.exec(`UPDATE job_definitions SET created_at = $1 WHERE name = 'hourly'`, hour.Add(-4*time.Hour-30*time.Minute))
	slot := func(h int) time.Time { return hour.Add(time.Duration(-h) * time.Hour) }
	insert := func(at time.Time, status, reason string) int64 {
		return a.insertRun(storetest.RunOpts{Job: "hourly", Status: status, ScheduledAt: at, Reason: reason})
	}
	insert(slot(0), "succeeded", "")
	insert(slot(1), "skipped", "overlap")
	failed := insert(slot(2), "failed", "")
	insert(slot(3), "missed", "catch-up window passed")
	// slot(4) has no row; slot(5) and slot(6) come before the job was created.

	res := a.do("GET", "/v1/jobs/hourly/slots?since="+slot(6).Format(time.RFC3339)+"&until="+hour.Add(2*time.Hour).Format(time.RFC3339), "", nil)
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	body := res.JSON(t)
	var got []string
	for _, s := range body["slots"].([]any) {
		m := s.(map[string]any)
		got = append(got, m["scheduled_at"].(string)+" "+m["outcome"].(string))
	}
	at := func(h int) string { return slot(h).Format(time.RFC3339) }
	assert.Equal(t, []string{
		at(-2) + " pending", at(-1) + " pending", at(0) + " succeeded", at(1) + " skipped",
		at(2) + " failed", at(3) + " missed", at(4) + " unrecorded",
	}, got)
	slots := body["slots"].([]any)
	assert.Equal(t, "overlap", slots[3].(map[string]any)["reason"])
	assert.Equal(t, float64(failed), slots[4].(map[string]any)["run_id"])
	assert.Equal(t, float64(1), slots[4].(map[string]any)["runs"])
	assert.Equal(t, map[string]any{"pending": float64(2), "succeeded": float64(1), "failed": float64(1), "skipped": float64(1),
		"missed": float64(1), "unrecorded": float64(1)}, body["counts"])

	// A window naming too many slots is refused with what to do.
	res = a.do("GET", "/v1/jobs/hourly/slots?since=2020-01-01T00:00:00Z", "", nil)
	assert.Equal(t, http.StatusUnprocessableEntity, res.Status)
	assert.Contains(t, string(res.Body), "narrow the window")
}
