package api

import (
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/schedulerhq/scheduler/internal/store"
	"github.com/schedulerhq/scheduler/internal/store/storetest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// parisChanges returns the days Europe/Paris's clocks change in the year after now (spring,
// autumn): the tests preview them whatever year they run in. In 2026 they are 2027-03-28
// and 2027-10-31.
func parisChanges(t *testing.T) (spring, autumn time.Time) {
	t.Helper()
	loc, err := time.LoadLocation("Europe/Paris")
	require.NoError(t, err)
	year := time.Now().Year() + 1
	for h := time.Date(year, 1, 1, 0, 0, 0, 0, time.UTC); h.Year() == year; h = h.Add(time.Hour) {
		_, a := h.In(loc).Zone()
		_, b := h.Add(time.Hour).In(loc).Zone()
		switch {
		case b > a:
			spring = h.Add(time.Hour)
		case b < a:
			autumn = h.Add(time.Hour)
		}
	}
	require.False(t, spring.IsZero() || autumn.IsZero())
	return spring, autumn // the instants of the changes, 01:00 UTC
}

// preview dry-runs a SQL job on "30 2 * * *" in Paris from start, with dst, and returns its view.
func preview(t *testing.T, a *testAPI, start time.Time, dst string) map[string]any {
	t.Helper()
	body := fmt.Sprintf(`{"name": "night", "schedule": "30 2 * * *", "time_zone": "Europe/Paris", %s
		"start_at": %q, "sql": {"target": "APP", "statements": "SELECT 1"}}`, dst, start.Format(time.RFC3339))
	res := a.do("POST", "/v1/jobs?dry_run=true", body, nil)
	require.Equal(t, http.StatusOK, res.Status, "body: %s", res.Body)
	return res.JSON(t)
}

func times(v any) []string {
	var out []string
	for _, t := range v.([]any) {
		out = append(out, t.(string))
	}
	return out
}

// The preview shows what a policy does on the days the clocks change: its next runs, the
// slots a change moved or doubled, and a warning naming each day.
func TestDryRunPreviewsTheDSTPolicy(t *testing.T) {
	t.Parallel()
	a := newRuntimeAPI(t, 0)
	spring, autumn := parisChanges(t)
	day := func(t time.Time, d int) string { return t.AddDate(0, 0, d).Format(time.DateOnly) }
	at := func(t time.Time, d int, hm string) string { return day(t, d) + "T" + hm + ":00Z" }
	springDay, autumnDay := day(spring, 0), day(autumn, 0)

	// Gap: 02:30 does not exist on the spring day.
	gapSkip := springDay + ": 02:30 Europe/Paris does not exist (clocks go forward); with dst.gap=skip that day has no run; dst.gap=shift runs it at 03:00"
	from := spring.AddDate(0, 0, -2).Truncate(24 * time.Hour)
	for _, dst := range []string{``, `"dst": {"gap": "skip"},`} {
		v := preview(t, a, from, dst)
		assert.Equal(t, []string{at(spring, -2, "01:30"), at(spring, -1, "01:30"), at(spring, 1, "00:30"), at(spring, 2, "00:30"), at(spring, 3, "00:30")},
			times(v["next_runs"]), "skip leaves %s out (%s)", springDay, dst)
		assert.Empty(t, v["next_runs_dst"])
		assert.Equal(t, gapSkip, v["warnings"].([]any)[0])
		assert.Equal(t, false, v["finished"])
	}
	v := preview(t, a, from, `"dst": {"gap": "shift"},`)
	assert.Equal(t, []string{at(spring, -2, "01:30"), at(spring, -1, "01:30"), at(spring, 0, "01:00"), at(spring, 1, "00:30"), at(spring, 2, "00:30")},
		times(v["next_runs"]), "shift runs %s at 03:00 Paris", springDay)
	assert.Equal(t, []any{map[string]any{"at": at(spring, 0, "01:00"), "change": "moved",
		"note": "02:30 Europe/Paris does not exist on " + springDay + " (clocks go forward): dst.gap=shift runs it at 03:00"}}, v["next_runs_dst"])
	assert.Equal(t, springDay+": 02:30 Europe/Paris does not exist (clocks go forward); with dst.gap=shift it runs at 03:00; dst.gap=skip would leave that day without a run",
		v["warnings"].([]any)[0])
	assert.Equal(t, map[string]any{"gap": "shift", "repeat": "first"}, v["definition"].(map[string]any)["dst"])

	// Repeat: 02:30 happens twice on the autumn day, at 00:30 and 01:30 UTC.
	from = autumn.AddDate(0, 0, -1).Truncate(24 * time.Hour)
	first, second := at(autumn, 0, "00:30"), at(autumn, 0, "01:30")
	for _, tt := range []struct {
		repeat string
		runs   []string
		marks  map[string]string
	}{
		{"first", []string{at(autumn, -1, "00:30"), first, at(autumn, 1, "01:30")}, map[string]string{}},
		{"last", []string{at(autumn, -1, "00:30"), second, at(autumn, 1, "01:30")}, map[string]string{second: "moved"}},
		{"both", []string{at(autumn, -1, "00:30"), first, second, at(autumn, 1, "01:30")}, map[string]string{first: "doubled", second: "doubled"}},
	} {
		v := preview(t, a, from, `"dst": {"repeat": "`+tt.repeat+`"},`)
		assert.Equal(t, tt.runs, times(v["next_runs"])[:len(tt.runs)], "repeat=%s", tt.repeat)
		marks := map[string]string{}
		for _, m := range v["next_runs_dst"].([]any) {
			marks[m.(map[string]any)["at"].(string)] = m.(map[string]any)["change"].(string)
		}
		assert.Equal(t, tt.marks, marks, "repeat=%s", tt.repeat)
		assert.Regexp(t, "^"+autumnDay+`: 02:30 Europe/Paris happens twice \(clocks go back\); with dst.repeat=`+tt.repeat+" it runs ",
			v["warnings"].([]any)[0], "repeat=%s", tt.repeat)
	}
}

// A list of schedules: the view keeps schedule a string (the specs joined) and lists them in
// schedules; the next runs name each instant once. GET of the job and the job list agree.
func TestListScheduleView(t *testing.T) {
	t.Parallel()
	a := newRuntimeAPI(t, 0)
	res := a.do("POST", "/v1/jobs", `{"name": "twice", "schedule": ["0 9 * * *", "0 17 * * *", "0 9 * * *"],
		"sql": {"target": "APP", "statements": "SELECT 1"}}`, nil)
	require.Equal(t, http.StatusCreated, res.Status, "body: %s", res.Body)
	v := res.JSON(t)
	assert.Equal(t, "0 9 * * *; 0 17 * * *", v["schedule"])
	assert.Equal(t, []any{"0 9 * * *", "0 17 * * *"}, v["schedules"])
	assert.Equal(t, "every day at 09:00 UTC and every day at 17:00 UTC", v["schedule_text"])
	assert.Equal(t, []any{"0 9 * * *", "0 17 * * *"}, v["definition"].(map[string]any)["schedule"])
	runs := times(v["next_runs"])
	require.Len(t, runs, nextRunsShown)
	for i := 1; i < len(runs); i++ {
		a, _ := time.Parse(time.RFC3339, runs[i-1])
		b, _ := time.Parse(time.RFC3339, runs[i])
		assert.Contains(t, []time.Duration{8 * time.Hour, 16 * time.Hour}, b.Sub(a), "09:00 and 17:00, each once: %v", runs)
	}
	assert.Empty(t, v["warnings"])

	got := a.do("GET", "/v1/jobs/twice", "", nil).JSON(t)
	delete(got, "last_run")
	delete(v, "last_run")
	assert.Equal(t, v, got)
	assert.Equal(t, v, listed(t, a, "twice"))

	one := a.do("GET", "/v1/jobs/plan-change", "", nil).JSON(t)
	assert.Equal(t, "0 2 * * *", one["schedule"], "one spec: schedule as before")
	assert.Equal(t, []any{"0 2 * * *"}, one["schedules"])
}

// listed returns the named job's view from GET /v1/jobs, without its last run.
func listed(t *testing.T, a *testAPI, name string) map[string]any {
	t.Helper()
	res := a.do("GET", "/v1/jobs", "", nil)
	require.Equal(t, http.StatusOK, res.Status)
	var list struct{ Jobs []map[string]any }
	require.NoError(t, json.Unmarshal(res.Body, &list))
	for _, j := range list.Jobs {
		if j["name"] == name {
			delete(j, "last_run")
			return j
		}
	}
	t.Fatalf("%s is not in the list", name)
	return nil
}

// After its last slot (max_runs ran, or end_at passed) a job shows finished with no next run,
// and stays in the list; its slots after the last run are not unrecorded.
func TestFinishedJobView(t *testing.T) {
	t.Parallel()
	a := newRuntimeAPI(t, 0)
	res := a.do("POST", "/v1/jobs", `{"name": "capped", "schedule": "@every 1m", "max_runs": 2,
		"sql": {"target": "APP", "statements": "SELECT 1"}}`, nil)
	require.Equal(t, http.StatusCreated, res.Status, "body: %s", res.Body)
	v := res.JSON(t)
	assert.Equal(t, false, v["finished"])
	assert.Len(t, v["next_runs"], 2, "two runs left")

	now := time.Now()
	a.insertRun(storetest.RunOpts{Job: "capped", Status: store.StatusSucceeded,
		ScheduledAt: now.Truncate(time.Minute).Add(-3 * time.Minute), StartedAt: now, FinishedAt: now})
	v = a.do("GET", "/v1/jobs/capped", "", nil).JSON(t)
	assert.Equal(t, false, v["finished"])
	assert.Len(t, v["next_runs"], 1, "one run left")
	assert.Equal(t, v["next_run_at"], v["next_runs"].([]any)[0])

	now = time.Now()
	a.insertRun(storetest.RunOpts{Job: "capped", Status: store.StatusFailed,
		ScheduledAt: now.Truncate(time.Minute).Add(-2 * time.Minute), StartedAt: now, FinishedAt: now})
	v = a.do("GET", "/v1/jobs/capped", "", nil).JSON(t)
	assert.Equal(t, true, v["finished"])
	assert.Empty(t, v["next_runs"])
	assert.Nil(t, v["next_run_at"])
	assert.Equal(t, true, listed(t, a, "capped")["finished"], "it stays in the list, finished")
	slots := a.do("GET", "/v1/jobs/capped/slots?since="+time.Now().Add(-10*time.Minute).UTC().Format(time.RFC3339), "", nil).JSON(t)
	assert.Equal(t, map[string]any{"succeeded": float64(1), "failed": float64(1)}, slots["counts"],
		"the slots after the last run were never due")

	// A window that ended (a definition stored before its end_at passed).
	res = a.do("POST", "/v1/jobs", `{"name": "ended", "schedule": "@every 1m", "end_at": "2099-01-01T00:00:00Z",
		"sql": {"target": "APP", "statements": "SELECT 1"}}`, nil)
	require.Equal(t, http.StatusCreated, res.Status, "body: %s", res.Body)
	a.exec(`UPDATE job_definitions SET definition = jsonb_set(definition, '{end_at}', '"2020-01-01T00:00:00Z"'), version = version + 1
		WHERE name = 'ended'`)
	v = a.do("GET", "/v1/jobs/ended", "", nil).JSON(t)
	assert.Equal(t, true, v["finished"])
	assert.Empty(t, v["next_runs"])
	assert.Equal(t, true, listed(t, a, "ended")["finished"])

	// A job with slots ahead is not finished; nor is a built-in job.
	assert.Equal(t, false, listed(t, a, "plan-change")["finished"])
}
