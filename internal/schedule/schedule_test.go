package schedule_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schedulerhq/scheduler/internal/schedule"
)

func utc(s string) time.Time {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		panic(err)
	}
	return t.UTC()
}

// gocron v2's Cron interface, restated so the check needs no gocron import.
var _ interface {
	IsValid(crontab string, location *time.Location, now time.Time) error
	Next(lastRun time.Time) time.Time
} = (*schedule.Schedule)(nil)

func TestNext(t *testing.T) {
	tests := []struct {
		name, spec, from string
		want             []string // successive slots after from
	}{
		{"5-field daily", "0 2 * * *", "2026-01-01T00:00:00Z", []string{"2026-01-01T02:00:00Z", "2026-01-02T02:00:00Z"}},
		{"5-field every 5 min", "*/5 * * * *", "2026-01-01T10:03:07.5Z", []string{"2026-01-01T10:05:00Z", "2026-01-01T10:10:00Z"}},
		{"on a slot is strictly after", "*/5 * * * *", "2026-01-01T10:05:00Z", []string{"2026-01-01T10:10:00Z"}},
		{"6-field seconds first", "*/10 * * * * *", "2026-01-01T10:00:00Z", []string{"2026-01-01T10:00:10Z", "2026-01-01T10:00:20Z"}},
		{"6-field fixed second", "30 0 3 * * *", "2026-01-01T00:00:00Z", []string{"2026-01-01T03:00:30Z", "2026-01-02T03:00:30Z"}},
		{"@hourly", "@hourly", "2026-01-01T10:00:00Z", []string{"2026-01-01T11:00:00Z"}},
		{"@daily", "@daily", "2026-01-01T10:00:00Z", []string{"2026-01-02T00:00:00Z"}},
		{"@weekly is Sunday", "@weekly", "2026-01-01T10:00:00Z", []string{"2026-01-04T00:00:00Z"}},
		{"@monthly", "@monthly", "2026-01-15T10:00:00Z", []string{"2026-02-01T00:00:00Z"}},
		{"@yearly", "@yearly", "2026-01-15T10:00:00Z", []string{"2027-01-01T00:00:00Z"}},
		{"@every 1s", "@every 1s", "2026-01-01T10:00:00.5Z", []string{"2026-01-01T10:00:01Z", "2026-01-01T10:00:02Z"}},
		{"@every 90s aligned to epoch", "@every 90s", "1970-01-01T00:16:39Z", []string{"1970-01-01T00:18:00Z", "1970-01-01T00:19:30Z"}},
		{"leap day", "0 0 29 2 *", "2026-01-01T00:00:00Z", []string{"2028-02-29T00:00:00Z"}},
		// 2026-03-08 02:30 does not exist in New York (clocks jump 02:00 -> 03:00): no slot that day.
		{"TZ daily across spring forward", "CRON_TZ=America/New_York 30 2 * * *", "2026-03-07T00:00:00Z",
			[]string{"2026-03-07T07:30:00Z", "2026-03-09T06:30:00Z", "2026-03-10T06:30:00Z"}},
		{"TZ daily across fall back", "CRON_TZ=America/New_York 30 2 * * *", "2026-10-31T00:00:00Z",
			[]string{"2026-10-31T06:30:00Z", "2026-11-01T07:30:00Z", "2026-11-02T07:30:00Z"}},
		// 01:30 happens twice on 2026-11-01 in New York; the job runs once, at the first.
		{"TZ repeated wall time fires once", "CRON_TZ=America/New_York 30 1 * * *", "2026-10-31T12:00:00Z",
			[]string{"2026-11-01T05:30:00Z", "2026-11-02T06:30:00Z"}},
		// An hourly job keeps running every real hour through the repeated hour.
		{"TZ hourly through fall back", "CRON_TZ=America/New_York 0 * * * *", "2026-11-01T04:30:00Z",
			[]string{"2026-11-01T05:00:00Z", "2026-11-01T06:00:00Z", "2026-11-01T07:00:00Z"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := schedule.Parse(tt.spec)
			require.NoError(t, err)
			at := utc(tt.from)
			for _, w := range tt.want {
				at = s.Next(at)
				assert.Equal(t, utc(w), at)
				assert.Equal(t, time.UTC, at.Location())
			}
		})
	}
}

func TestEveryAlignment(t *testing.T) {
	times := []time.Time{
		utc("2026-01-01T00:00:00Z"),
		utc("2026-05-17T13:37:42.123456789Z"),
		utc("1969-12-31T23:59:59.5Z"), // before the epoch: still aligned
		time.Date(2026, 7, 1, 9, 0, 1, 0, time.FixedZone("x", 3600+1800)),
	}
	for _, d := range []time.Duration{time.Second, 90 * time.Second, 7 * time.Minute, time.Hour, 25 * time.Hour} {
		s, err := schedule.Parse("@every " + d.String())
		require.NoError(t, err)
		for _, at := range times {
			name := fmt.Sprintf("%v/%v", d, at)
			next, prev := s.Next(at), s.Prev(at)
			assert.Zero(t, next.Unix()%int64(d/time.Second), name)
			assert.Zero(t, prev.Unix()%int64(d/time.Second), name)
			assert.True(t, next.After(at), name)
			assert.False(t, prev.After(at), name)
			assert.Equal(t, d, next.Sub(prev), name)
			assert.Equal(t, d, s.Period(at), name)
		}
	}
}

// TestPrevNextRoundTrip checks that Prev, Next and Nearest agree with each
// other at many times, including exactly on slots and across DST changes.
func TestPrevNextRoundTrip(t *testing.T) {
	specs := []string{
		"0 2 * * *", "*/5 * * * *", "*/10 * * * * *", "@every 90s", "@monthly", "0 0 29 2 *",
		"CRON_TZ=America/New_York 30 2 * * *", "CRON_TZ=America/New_York 30 1 * * *",
		"CRON_TZ=America/New_York 0 * * * *", "CRON_TZ=Australia/Lord_Howe */20 1,2 * * *",
	}
	starts := []time.Time{utc("2026-03-06T00:00:00Z"), utc("2026-10-30T00:00:00Z"), utc("2026-04-03T00:00:00Z")}
	for _, spec := range specs {
		t.Run(spec, func(t *testing.T) {
			s, err := schedule.Parse(spec)
			require.NoError(t, err)
			for _, start := range starts {
				for at := start; at.Before(start.Add(4 * 24 * time.Hour)); at = at.Add(97*time.Minute + 13*time.Second + 250*time.Millisecond) {
					prev, next := s.Prev(at), s.Next(at)
					require.False(t, prev.IsZero(), "Prev(%v)", at)
					require.False(t, prev.After(at), "Prev(%v)=%v", at, prev)
					assert.Equal(t, prev, s.Next(prev.Add(-time.Second)), "Prev(%v)=%v is a slot", at, prev)
					assert.Equal(t, next, s.Next(prev), "no slot between Prev(%v) and Next", at)

					// Exactly on a slot, and a little either side of it.
					assert.Equal(t, next, s.Prev(next), "Prev of a slot is itself")
					assert.Equal(t, next, s.Nearest(next))
					assert.Equal(t, next, s.Nearest(next.Add(-1500*time.Millisecond)), "timer fired early")
					assert.Equal(t, next, s.Nearest(next.Add(900*time.Millisecond)), "timer fired late")

					near := s.Nearest(at)
					assert.Contains(t, []time.Time{prev, next}, near)
					assert.LessOrEqual(t, absDur(near.Sub(at)), absDur(otherOf(near, prev, next).Sub(at)), "Nearest(%v)", at)
				}
			}
		})
	}
}

func otherOf(x, a, b time.Time) time.Time {
	if x.Equal(a) {
		return b
	}
	return a
}

func absDur(d time.Duration) time.Duration {
	if d < 0 {
		return -d
	}
	return d
}

func TestPeriod(t *testing.T) {
	tests := []struct {
		spec, at string
		want     time.Duration
	}{
		{"0 2 * * *", "2026-01-10T12:00:00Z", 24 * time.Hour},
		{"0 2 * * *", "2026-01-10T02:00:00Z", 24 * time.Hour},
		{"*/5 * * * *", "2026-01-10T12:03:00Z", 5 * time.Minute},
		{"@every 90s", "2026-01-10T12:03:00Z", 90 * time.Second},
		{"@hourly", "2026-01-10T12:03:00Z", time.Hour},
		{"0 0 1 * *", "2026-03-15T00:00:00Z", 28 * 24 * time.Hour}, // February
		{"0 30 9 * * 1-5", "2026-01-12T10:00:00Z", 72 * time.Hour}, // Monday: since Friday
		// The DST-skipped day makes the period that includes it two days long.
		{"CRON_TZ=America/New_York 30 2 * * *", "2026-03-09T12:00:00Z", 47 * time.Hour},
	}
	for _, tt := range tests {
		t.Run(tt.spec+"@"+tt.at, func(t *testing.T) {
			s, err := schedule.Parse(tt.spec)
			require.NoError(t, err)
			assert.Equal(t, tt.want, s.Period(utc(tt.at)))
		})
	}
}

func TestParseAccepts(t *testing.T) {
	for _, spec := range []string{
		"0 2 * * *", " 0 2 * * * ", "*/10 * * * * *", "@every 1s", "@every 1h30m", "@hourly", "@daily",
		"@weekly", "@monthly", "@yearly", "CRON_TZ=Europe/Berlin 0 2 * * *", "CRON_TZ=UTC @daily",
		"CRON_TZ=Asia/Kolkata @every 10s", "0 0 29 2 *",
	} {
		s, err := schedule.Parse(spec)
		require.NoError(t, err, spec)
		assert.Equal(t, spec, s.String())
		assert.NoError(t, s.IsValid("anything", time.Local, time.Now()))
	}
}

func TestParseRefuses(t *testing.T) {
	tests := []struct{ name, spec, want string }{
		{"too few fields", "*/5 * *", `schedule "*/5 * *": expected 5 or 6 fields (e.g. "0 2 * * *", "*/10 * * * * *") or "@every 30s"`},
		{"too many fields", "0 0 0 2 * * *", "expected 5 or 6 fields"},
		{"empty", "", "expected 5 or 6 fields"},
		{"never fires", "0 0 30 2 *", `schedule "0 0 30 2 *": never fires within five years`},
		{"bad zone", "CRON_TZ=Mars/Olympus 0 2 * * *", `unknown time zone "Mars/Olympus" (want an IANA zone such as "UTC"`},
		{"machine-local zone", "CRON_TZ=Local 0 2 * * *", `unknown time zone "Local"`},
		{"every 0s", "@every 0s", `schedule "@every 0s": @every needs a whole number of seconds, at least 1s (e.g. "@every 30s"`},
		{"every negative", "@every -1s", "@every needs a whole number of seconds, at least 1s"},
		{"every fraction", "@every 1.5s", "@every needs a whole number of seconds, at least 1s"},
		{"every sub-second", "@every 500ms", "@every needs a whole number of seconds, at least 1s"},
		{"every no duration", "@every", "@every needs a whole number of seconds"},
		{"minute out of range", "61 * * * *", `schedule "61 * * * *": end of range (61) above maximum (59)`},
		{"unknown descriptor", "@fortnightly", `(want a 5-field cron expression such as "0 2 * * *"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := schedule.Parse(tt.spec)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.want)
		})
	}
}

// A one-time schedule has exactly its one slot, in both directions, and still parses once
// that slot has passed (the job that ran stays listed).
func TestAtHasOneSlot(t *testing.T) {
	s, err := schedule.Parse("@at 2026-12-01T10:00:00+01:00")
	require.NoError(t, err)
	slot := utc("2026-12-01T09:00:00Z")
	assert.True(t, s.Once())
	assert.Equal(t, slot, s.Next(slot.Add(-time.Hour)))
	assert.True(t, s.Next(slot).IsZero(), "nothing after the one slot")
	assert.Equal(t, slot, s.Prev(slot.Add(time.Hour)))
	assert.True(t, s.Prev(slot.Add(-time.Second)).IsZero(), "nothing before it")
	assert.Equal(t, time.Duration(0), s.Period(slot))
	assert.Equal(t, "once, at 2026-12-01 09:00:00 UTC", s.Text())

	past, err := schedule.Parse("@at 2001-01-01T00:00:00Z")
	require.NoError(t, err, "a passed one-time slot still parses")
	assert.True(t, past.Next(time.Now()).IsZero())

	for _, bad := range []string{"@at tomorrow", "@at 2026-12-01T09:00:00", "@at 2026-12-01T09:00:00.5Z"} {
		_, err := schedule.Parse(bad)
		assert.Error(t, err, bad)
	}
}
