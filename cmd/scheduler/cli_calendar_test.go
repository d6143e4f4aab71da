package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schedulerhq/scheduler/internal/namespace"
	"github.com/schedulerhq/scheduler/internal/runtimejob"
	"github.com/schedulerhq/scheduler/replica/replicatest"
)

// A file's schedule may be a list, as the API's; dst, start_at, end_at and max_runs are
// read as the API reads them, and get writes them back as apply reads them.
func TestApplyReadsTheCalendarFields(t *testing.T) {
	t.Parallel()
	file := `jobs:
- name: twice-a-day
  schedule: ["0 9 * * *", "0 17 * * *", "0 9 * * *"]
  time_zone: Europe/Paris
  dst: {gap: shift, repeat: both}
  start_at: 2027-01-01T00:00:00+01:00
  end_at: "2027-12-31T23:00:00Z"
  max_runs: 100
  sql: {target: APP, statements: SELECT 1}
- name: block-list
  schedule:
    - 30 2 * * *
  sql: {target: APP, statements: SELECT 1}
- name: wrong
  schedule: {at: 9}
  sql: {target: APP, statements: SELECT 1}
`
	defs, problems := parseJobs([]byte(file), namespace.Default)
	assert.Equal(t, []string{`jobs[2] (wrong): schedule: want a cron expression or a list of them, e.g. "0 2 * * *" or ["0 9 * * *", "0 17 * * *"]`}, problems)
	require.Len(t, defs, 3)
	d := defs[0]
	assert.Equal(t, runtimejob.Schedules{"0 9 * * *", "0 17 * * *", "0 9 * * *"}, d.Schedule)
	assert.Equal(t, &runtimejob.DST{Gap: "shift", Repeat: "both"}, d.DST)
	assert.Equal(t, "2027-01-01T00:00:00+01:00", d.StartAt)
	assert.Equal(t, "2027-12-31T23:00:00Z", d.EndAt)
	assert.Equal(t, 100, d.MaxRuns)
	assert.Equal(t, runtimejob.Schedules{"30 2 * * *"}, defs[1].Schedule)

	j, errs := runtimejob.Check(d, runtimejob.Env{})
	require.Empty(t, errs)
	stored, err := json.Marshal(j.Def)
	require.NoError(t, err)
	out, err := definitionsYAML(stored)
	require.NoError(t, err)
	assert.Contains(t, string(out), "  schedule:\n  - 0 9 * * *\n  - 0 17 * * *\n", "%s", out)
	back, problems := parseJobs(out, namespace.Default)
	require.Empty(t, problems, "%s", out)
	assert.Equal(t, []runtimejob.Definition{j.Def}, back)
	assert.True(t, sameDefinition(stored, d), "the file's job is the stored one: apply sends nothing")
	assert.False(t, strings.Contains(string(out), "max_runs: \"100\""), "a number stays a number")
}

// scheduler job shows the runs a clock change moved and what the changes of the year do.
func TestJobShowsClockChanges(t *testing.T) {
	t.Parallel()
	srv := replicatest.Start(t, replicatest.Options{Token: cliToken, ReadToken: cliReadToken})
	env := []string{"SCHEDULER_URL=" + srv.URL, "SCHEDULER_API_TOKEN=" + cliToken}
	// Two days before the spring change of next year in Paris (2027-03-28 in 2026).
	loc, err := time.LoadLocation("Europe/Paris")
	require.NoError(t, err)
	var spring time.Time
	for h := time.Date(time.Now().Year()+1, 1, 1, 0, 0, 0, 0, time.UTC); spring.IsZero(); h = h.Add(time.Hour) {
		if _, a := h.In(loc).Zone(); a == 7200 {
			spring = h
		}
	}
	file := filepath.Join(t.TempDir(), "jobs.yaml")
	require.NoError(t, os.WriteFile(file, []byte(fmt.Sprintf(`jobs:
- name: night
  schedule: "30 2 * * *"
  time_zone: Europe/Paris
  dst: {gap: shift}
  start_at: %s
  http: {url: "https://example.com/hook"}
`, spring.AddDate(0, 0, -2).Truncate(24*time.Hour).Format(time.RFC3339))), 0o600))
	code, _, stderr := runCLI(t, env, "apply", "-f", file)
	require.Equal(t, exitOK, code, stderr)

	code, out, stderr := runCLI(t, env, "job", "night")
	require.Equal(t, exitOK, code, stderr)
	day := spring.Format(time.DateOnly)
	assert.Contains(t, out, "(moved: 02:30 Europe/Paris does not exist on "+day+" (clocks go forward): dst.gap=shift runs it at 03:00)")
	assert.Contains(t, out, "Clock changes:\n  "+day+": 02:30 Europe/Paris does not exist (clocks go forward); with dst.gap=shift it runs at 03:00")

	code, out, stderr = runCLI(t, env, "jobs")
	require.Equal(t, exitOK, code, stderr)
	assert.Regexp(t, `(?m)^night +every day at 02:30 Europe/Paris +no +- +`+day[:4], out, "not finished: its next run")
}
