package api

import (
	"encoding/json"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schedulerhq/scheduler/internal/store"
	"github.com/schedulerhq/scheduler/internal/store/storetest"
)

// TestSameRunComparesEveryField changes each field of a run in turn: sameRun must tell
// every change, or a job list would keep showing a last run's old encoding.
func TestSameRunComparesEveryField(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	s, n, v := "x", int64(1), int64(1)
	base := store.Run{ID: 1, Job: "j", Trigger: "schedule", Status: "running", ScheduledAt: &at, CreatedAt: at,
		StartedAt: &at, FinishedAt: &at, InstanceID: &s, Epoch: &n, Stats: json.RawMessage(`{}`), Error: &s,
		Reason: &s, Params: json.RawMessage(`{}`), RecoversRunID: &n, CancelRequested: true,
		DefinitionVersion: &v, Rerun: 1, NextAttemptAt: &at, Traceparent: &s}
	rt := reflect.TypeOf(base)
	for i := range rt.NumField() {
		changed := base
		f := reflect.ValueOf(&changed).Elem().Field(i)
		require.False(t, f.IsZero(), "the base run sets %s, so that its change shows", rt.Field(i).Name)
		f.Set(differentValue(t, f))
		assert.False(t, sameRun(&base, &changed), "sameRun misses a change of %s", rt.Field(i).Name)
		assert.True(t, sameRun(&base, &base))
	}
}

// differentValue returns a value of f's type that differs from f's.
func differentValue(t *testing.T, f reflect.Value) reflect.Value {
	switch v := f.Interface().(type) {
	case time.Time:
		return reflect.ValueOf(v.Add(time.Second))
	case json.RawMessage:
		return reflect.ValueOf(json.RawMessage(`{"a":1}`))
	}
	switch f.Kind() {
	case reflect.Int, reflect.Int64:
		return reflect.ValueOf(f.Int() + 1).Convert(f.Type())
	case reflect.String:
		return reflect.ValueOf(f.String() + "x")
	case reflect.Bool:
		return reflect.ValueOf(!f.Bool())
	case reflect.Pointer:
		p := reflect.New(f.Type().Elem())
		p.Elem().Set(differentValue(t, f.Elem()))
		return p
	}
	t.Fatalf("no different value for a %s: add a case", f.Type())
	return reflect.Value{}
}

// TestJobListShowsWhatChanged lists the jobs after each change a replica's caches of the
// list must see: a last run that finishes, a newer run, a replaced definition, a deleted
// job.
func TestJobListShowsWhatChanged(t *testing.T) {
	t.Parallel()
	a := newRuntimeAPI(t, 0)
	res := a.do("POST", "/v1/jobs", dailyReport, nil)
	require.Equal(t, http.StatusCreated, res.Status, "body: %s", res.Body)
	listed := func() map[string]any {
		t.Helper()
		res := a.do("GET", "/v1/jobs", "", nil)
		require.Equal(t, http.StatusOK, res.Status, "body: %s", res.Body)
		for _, j := range res.JSON(t)["jobs"].([]any) {
			if job := j.(map[string]any); job["name"] == "daily-report" {
				return job
			}
		}
		return nil
	}
	lastRun := func() map[string]any {
		t.Helper()
		job := listed()
		require.NotNil(t, job)
		run, _ := job["last_run"].(map[string]any)
		return run
	}
	assert.Nil(t, lastRun())

	first := a.insertRun(storetest.RunOpts{Job: "daily-report", Status: store.StatusRunning, StartedAt: time.Now()})
	run := lastRun()
	assert.Equal(t, float64(first), run["id"])
	assert.Equal(t, "running", run["status"])
	assert.Nil(t, run["next_attempt_at"])

	a.exec(`UPDATE job_runs SET next_attempt_at = now() + interval '1 minute' WHERE id = $1`, first)
	assert.NotNil(t, lastRun()["next_attempt_at"], "a running run's change of the same status shows")

	a.exec(`UPDATE job_runs SET status = 'failed', finished_at = now(), error = 'boom' WHERE id = $1`, first)
	run = lastRun()
	assert.Equal(t, "failed", run["status"])
	assert.Equal(t, "boom", run["error"])

	second := a.insertRun(storetest.RunOpts{Job: "daily-report", Status: store.StatusQueued})
	assert.Equal(t, float64(second), lastRun()["id"])

	hourly := strings.Replace(dailyReport, "0 2 * * *", "0 * * * *", 1)
	res = a.do("PUT", "/v1/jobs/daily-report", hourly, header{"If-Match": `"1"`})
	require.Equal(t, http.StatusOK, res.Status, "body: %s", res.Body)
	job := listed()
	assert.Equal(t, float64(2), job["version"])
	assert.Equal(t, "0 * * * *", job["definition"].(map[string]any)["schedule"])
	assert.Equal(t, float64(second), job["last_run"].(map[string]any)["id"], "a new version keeps its last run")

	res = a.do("DELETE", "/v1/jobs/daily-report", "", nil)
	require.Equal(t, http.StatusNoContent, res.Status, "body: %s", res.Body)
	assert.Nil(t, listed(), "a deleted job leaves the list")
}
