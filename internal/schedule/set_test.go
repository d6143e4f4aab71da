package schedule_test

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schedulerhq/scheduler/internal/schedule"
)

// A list of specs names the union of their slots; an instant two specs (or one spec twice)
// name is one slot.
func TestListNamesEachInstantOnce(t *testing.T) {
	s, err := schedule.New([]string{"0 9 * * *", "0 17 * * *", "0 9 * * *"}, schedule.Options{})
	require.NoError(t, err)
	from := utc("2027-01-01T00:00:00Z")
	want := utcs("2027-01-01T09:00:00Z", "2027-01-01T17:00:00Z", "2027-01-02T09:00:00Z", "2027-01-02T17:00:00Z", "2027-01-03T09:00:00Z")
	assert.Equal(t, want, slotsFrom(s, from, 5))
	assert.Equal(t, want[1], s.Prev(want[2].Add(-time.Second)))
	assert.Equal(t, want[2], s.Prev(want[2]))
	assert.Equal(t, want[2], s.Nearest(want[2].Add(time.Second)))
	assert.Equal(t, 8*time.Hour, s.Period(want[1]), "09:00 to 17:00")
	assert.Equal(t, 16*time.Hour, s.Period(want[2]), "17:00 to 09:00")
	assert.Equal(t, []string{"0 9 * * *", "0 17 * * *", "0 9 * * *"}, s.Specs())
	assert.Equal(t, "0 9 * * *; 0 17 * * *; 0 9 * * *", s.String())
	assert.Equal(t, "every day at 09:00 UTC and every day at 17:00 UTC", s.Text())
	assert.False(t, s.Once())

	// Different specs naming the same instant: Mondays at 09:00 once.
	overlap, err := schedule.New([]string{"0 9 * * 1", "0 9 * * *", "@every 12h"}, schedule.Options{})
	require.NoError(t, err)
	got := slotsFrom(overlap, utc("2027-01-04T00:00:00Z"), 4) // a Monday
	assert.Equal(t, utcs("2027-01-04T09:00:00Z", "2027-01-04T12:00:00Z", "2027-01-05T00:00:00Z", "2027-01-05T09:00:00Z"), got)

	one, err := schedule.New([]string{"0 9 * * *"}, schedule.Options{})
	require.NoError(t, err)
	assert.Equal(t, []string{"0 9 * * *"}, one.Specs())
	assert.Equal(t, "0 9 * * *", one.String())
}

func TestNewRefuses(t *testing.T) {
	_, err := schedule.New(nil, schedule.Options{})
	assert.Error(t, err)

	_, err = schedule.New([]string{"0 9 * * *", "61 * * * *"}, schedule.Options{})
	var se *schedule.SpecError
	require.True(t, errors.As(err, &se), "%v", err)
	assert.Equal(t, 1, se.Index)
	assert.Contains(t, se.Error(), "above maximum (59)")

	_, err = schedule.New([]string{"CRON_TZ=Europe/Paris 0 9 * * *", "CRON_TZ=America/New_York 0 9 * * *"}, schedule.Options{})
	require.True(t, errors.As(err, &se))
	assert.Equal(t, 1, se.Index)
	assert.Contains(t, se.Error(), "one time zone")

	_, err = schedule.New([]string{"0 9 1 1 *"}, schedule.Options{From: utc("2027-02-01T00:00:00Z"), Until: utc("2027-12-01T00:00:00Z")})
	assert.ErrorContains(t, err, "no slot from 2027-02-01T00:00:00Z to 2027-12-01T00:00:00Z")
	_, err = schedule.New([]string{"0 9 * * *"}, schedule.Options{From: utc("2027-02-01T00:00:00Z"), Until: utc("2027-01-01T00:00:00Z")})
	assert.ErrorContains(t, err, "ends before it starts")
}

// No slot lies outside the window, in either direction; the period stays the schedule's.
func TestWindow(t *testing.T) {
	start, end := utc("2027-01-10T09:00:00Z"), utc("2027-01-12T09:00:00Z")
	s, err := schedule.New([]string{"0 9 * * *", "0 21 * * *"}, schedule.Options{From: start, Until: end})
	require.NoError(t, err)
	all := utcs("2027-01-10T09:00:00Z", "2027-01-10T21:00:00Z", "2027-01-11T09:00:00Z", "2027-01-11T21:00:00Z", "2027-01-12T09:00:00Z")
	assert.Equal(t, all, slotsFrom(s, utc("2026-01-01T00:00:00Z"), 10), "both ends inclusive")
	assert.True(t, s.Next(end).IsZero())
	assert.True(t, s.Next(utc("2030-01-01T00:00:00Z")).IsZero())
	assert.Equal(t, end, s.Prev(utc("2030-01-01T00:00:00Z")))
	assert.True(t, s.Prev(start.Add(-time.Second)).IsZero())
	assert.Equal(t, start, s.Prev(start))
	assert.Equal(t, 12*time.Hour, s.Period(utc("2030-01-01T00:00:00Z")), "the schedule's period, not the window's")

	every, err := schedule.New([]string{"@every 1s"}, schedule.Options{From: utc("2027-01-10T09:00:00.5Z"), Until: utc("2027-01-10T09:00:03Z")})
	require.NoError(t, err)
	assert.Equal(t, utcs("2027-01-10T09:00:01Z", "2027-01-10T09:00:02Z", "2027-01-10T09:00:03Z"), slotsFrom(every, time.Time{}, 10))

	open, err := schedule.New([]string{"0 9 * * *"}, schedule.Options{From: start})
	require.NoError(t, err)
	assert.Equal(t, start, open.Next(time.Time{}))
	assert.False(t, open.Next(utc("2040-01-01T00:00:00Z")).IsZero(), "no end")
}

// The key names what decides the slots: jobs with the same key may share a timer.
func TestKey(t *testing.T) {
	keys := map[string]bool{}
	for _, o := range []schedule.Options{
		{}, {DST: schedule.DST{Gap: schedule.GapShift}}, {DST: schedule.DST{Repeat: schedule.RepeatBoth}},
		{From: utc("2027-01-01T00:00:00Z")}, {Until: utc("2027-01-01T00:00:00Z")},
	} {
		s, err := schedule.New([]string{"CRON_TZ=Europe/Paris 30 2 * * *"}, o)
		require.NoError(t, err)
		keys[s.Key()] = true
	}
	assert.Len(t, keys, 5)
	p, err := schedule.Parse("0 9 * * *")
	require.NoError(t, err)
	assert.Equal(t, "0 9 * * *", p.Key())
}

// A window with only an end, long past, still parses: stored definitions load whatever the
// date. It has no next slot.
func TestWindowThatEnded(t *testing.T) {
	s, err := schedule.New([]string{"30 2 * * *"}, schedule.Options{Until: utc("2020-01-01T00:00:00Z")})
	require.NoError(t, err)
	assert.True(t, s.Next(time.Now()).IsZero())
	assert.Equal(t, utc("2019-12-31T02:30:00Z"), s.Prev(time.Now()))
}
