package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schedulerhq/scheduler/internal/definition"
	"github.com/schedulerhq/scheduler/internal/namespace"
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
	assert.Equal(t, definition.Schedules{"0 9 * * *", "0 17 * * *", "0 9 * * *"}, d.Schedule)
	assert.Equal(t, &definition.DST{Gap: "shift", Repeat: "both"}, d.DST)
	assert.Equal(t, "2027-01-01T00:00:00+01:00", d.StartAt)
	assert.Equal(t, "2027-12-31T23:00:00Z", d.EndAt)
	assert.Equal(t, 100, d.MaxRuns)
	assert.Equal(t, definition.Schedules{"30 2 * * *"}, defs[1].Schedule)

	j, errs := definition.Check(d, definition.Env{})
	require.Empty(t, errs)
	stored, err := json.Marshal(j.Def)
	require.NoError(t, err)
	out, err := definitionsYAML(stored)
	require.NoError(t, err)
	assert.Contains(t, string(out), "  schedule:\n  - 0 9 * * *\n  - 0 17 * * *\n", "%s", out)
	back, problems := parseJobs(out, namespace.Default)
	require.Empty(t, problems, "%s", out)
	assert.Equal(t, []definition.Definition{j.Def}, back)
	assert.True(t, sameDefinition(stored, d), "the file's job is the stored one: apply sends nothing")
	assert.False(t, strings.Contains(string(out), "max_runs: \"100\""), "a number stays a number")
}
