package runtimejob_test

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schedulerhq/scheduler/internal/runtimejob"
	"github.com/schedulerhq/scheduler/internal/schedule"
)

const sqlJob = `"sql": {"target": "APP", "statements": "SELECT 1"}`

// A definition without the calendar fields reads back byte for byte as before them: no
// stored definition changes its normal form, so none gets a new version from apply.
func TestCalendarFieldsLeftOutChangeNothing(t *testing.T) {
	d := decode(t, `{"name": "daily", "schedule": "30 2 * * *", "time_zone": "Europe/Paris", `+sqlJob+`}`)
	j, errs := runtimejob.Check(d, env())
	require.Empty(t, errs)
	b, err := json.Marshal(j.Def)
	require.NoError(t, err)
	assert.JSONEq(t, `{"name": "daily", "schedule": "30 2 * * *", "time_zone": "Europe/Paris", "timeout": "1m", "overlap": "skip",
		"sql": {"target": "APP", "statements": "SELECT 1"}}`, string(b))
	assert.Contains(t, string(b), `"schedule":"30 2 * * *"`, "one spec is a string")
	p, err := schedule.Parse("CRON_TZ=Europe/Paris 30 2 * * *")
	require.NoError(t, err)
	assert.Equal(t, p.Key(), j.Schedule.Key(), "the schedule is Parse's")
	assert.Zero(t, j.Config().MaxRuns)
}

func TestCalendarFields(t *testing.T) {
	d := decode(t, `{"name": "windowed", "schedule": ["0 9 * * *", " 0 17 * * *", "0 9 * * *"], "time_zone": "Europe/Paris",
		"dst": {"gap": "shift"}, "start_at": "2026-12-01T00:00:00+01:00", "end_at": "2027-12-31T23:00:00Z", "max_runs": 3, `+sqlJob+`}`)
	j, errs := runtimejob.Check(d, env())
	require.Empty(t, errs)
	assert.Equal(t, runtimejob.Schedules{"0 9 * * *", "0 17 * * *"}, j.Def.Schedule, "trimmed, a repeated spec once")
	assert.Equal(t, &runtimejob.DST{Gap: "shift", Repeat: "first"}, j.Def.DST, "the half left out is filled in")
	assert.Equal(t, "2026-12-01T00:00:00+01:00", j.Def.StartAt)
	assert.Equal(t, 3, j.Config().MaxRuns)
	b, err := json.Marshal(j.Def)
	require.NoError(t, err)
	assert.Contains(t, string(b), `"schedule":["0 9 * * *","0 17 * * *"],"time_zone":"Europe/Paris","dst":{"gap":"shift","repeat":"first"},"start_at":"2026-12-01T00:00:00+01:00","end_at":"2027-12-31T23:00:00Z","max_runs":3`)

	// The schedule is the union, in the window.
	s := j.Schedule
	assert.Equal(t, time.Date(2026, 11, 30, 23, 0, 0, 0, time.UTC), s.Next(time.Time{}).Add(-9*time.Hour), "the first slot is 09:00 Paris on 1 December")
	assert.Equal(t, 8*time.Hour, s.Next(s.Next(time.Time{})).Sub(s.Next(time.Time{})))
	assert.True(t, s.Next(time.Date(2028, 1, 1, 0, 0, 0, 0, time.UTC)).IsZero(), "nothing after end_at")
	assert.Equal(t, []string{"CRON_TZ=Europe/Paris 0 9 * * *", "CRON_TZ=Europe/Paris 0 17 * * *"}, s.Specs())

	// Checked twice, it stays the same: the normal form is stable.
	again, errs := runtimejob.Check(j.Def, env())
	require.Empty(t, errs)
	b2, _ := json.Marshal(again.Def)
	assert.Equal(t, string(b), string(b2))

	one := decode(t, `{"name": "one", "schedule": ["@every 1m"], `+sqlJob+`}`)
	j, errs = runtimejob.Check(one, env())
	require.Empty(t, errs)
	b, _ = json.Marshal(j.Def)
	assert.Contains(t, string(b), `"schedule":"@every 1m"`, "a list of one is written as its spec")
}

func TestCalendarFieldsRefused(t *testing.T) {
	tests := []struct {
		name, body, field, want string
	}{
		{"empty list", `"schedule": []`, "schedule", "required"},
		{"empty spec in a list", `"schedule": ["0 9 * * *", " "]`, "schedule[1]", "required"},
		{"bad spec in a list", `"schedule": ["0 9 * * *", "61 * * * *"]`, "schedule[1]", "above maximum (59)"},
		{"zone twice in a list", `"schedule": ["0 9 * * *", "CRON_TZ=UTC 0 17 * * *"], "time_zone": "Europe/Paris"`, "time_zone", "not both"},
		{"zones differ", `"schedule": ["CRON_TZ=Europe/Paris 0 9 * * *", "CRON_TZ=Asia/Tokyo 0 17 * * *"]`, "schedule[1]", "one time zone"},
		{"too many specs", `"schedule": [` + manySpecs(33) + `]`, "schedule", "at most 32"},
		{"gap", `"schedule": "0 2 * * *", "dst": {"gap": "later"}`, "dst.gap", `"skip" or "shift"`},
		{"repeat", `"schedule": "0 2 * * *", "dst": {"repeat": "twice"}`, "dst.repeat", `"first", "last" or "both"`},
		{"start_at", `"schedule": "0 2 * * *", "start_at": "tomorrow"`, "start_at", "RFC 3339"},
		{"end_at", `"schedule": "0 2 * * *", "end_at": "2027-01-01"`, "end_at", "RFC 3339"},
		{"end before start", `"schedule": "0 2 * * *", "start_at": "2027-02-01T00:00:00Z", "end_at": "2027-01-01T00:00:00Z"`, "end_at", "before start_at"},
		{"end passed", `"schedule": "0 2 * * *", "end_at": "2026-11-01T00:00:00Z"`, "end_at", "has passed"},
		{"no slot in the window", `"schedule": "0 2 1 1 *", "start_at": "2027-02-01T00:00:00Z", "end_at": "2027-03-01T00:00:00Z"`, "end_at", "no slot from"},
		{"max_runs", `"schedule": "0 2 * * *", "max_runs": -1`, "max_runs", "out of range"},
		{"max_runs too big", `"schedule": "0 2 * * *", "max_runs": 2000000000`, "max_runs", "out of range"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := decode(t, `{"name": "x", `+tt.body+`, `+sqlJob+`}`)
			_, errs := runtimejob.Check(d, env())
			got := fields(errs)
			require.Contains(t, got, tt.field, "%v", errs)
			assert.Contains(t, got[tt.field], tt.want)
		})
	}
	_, err := runtimejob.Decode([]byte(`{"name": "x", "schedule": 5}`))
	assert.ErrorContains(t, err, "schedule: want a cron expression or a list of them")
	_, err = runtimejob.Decode([]byte(`{"name": "x", "schedule": "0 2 * * *", "dst": {"gap": "skip", "fold": "x"}}`))
	assert.ErrorContains(t, err, `unknown field "fold"`)
}

// manySpecs is n distinct specs, as the items of a JSON list.
func manySpecs(n int) string {
	var specs []string
	for i := range n {
		specs = append(specs, fmt.Sprintf("%d %d * * *", i%60, i/60))
	}
	b, _ := json.Marshal(specs)
	return string(b[1 : len(b)-1])
}
