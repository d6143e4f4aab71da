package jobs

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestRoundsOpenAtTheDropInstant runs rounds-open one second before and exactly at the
// instant each round must open, and, where the drop time occurs twice, again at its second
// occurrence, which must change nothing.
func TestRoundsOpenAtTheDropInstant(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, zone, date, drop string
		opens                  string // the expected open instant
		again                  string // a later instant showing the drop time again (fall-back), or ""
	}{
		{"UTC", "UTC", "2024-06-01", "09:00", "2024-06-01T09:00:00Z", ""},
		{"UTC+14", "Pacific/Kiritimati", "2024-06-01", "09:00", "2024-05-31T19:00:00Z", ""},
		{"UTC-11", "Pacific/Pago_Pago", "2024-06-01", "09:00", "2024-06-01T20:00:00Z", ""},
		{"UTC+5:30", "Asia/Kolkata", "2024-06-01", "09:00", "2024-06-01T03:30:00Z", ""},
		{"UTC+5:45", "Asia/Kathmandu", "2024-06-01", "09:00", "2024-06-01T03:15:00Z", ""},
		{"UTC+14 drop at midnight", "Pacific/Kiritimati", "2024-06-01", "00:00", "2024-05-31T10:00:00Z", ""},
		// 02:00 EST jumps to 03:00 EDT (07:00Z): 02:30 does not exist, the round opens at
		// 03:00 EDT, not at PostgreSQL's 03:30.
		{"New York spring-forward gap", "America/New_York", "2024-03-10", "02:30", "2024-03-10T07:00:00Z", ""},
		// 02:00 EDT falls back to 01:00 EST (06:00Z): 01:30 occurs at 05:30Z and 06:30Z.
		{"New York fall-back overlap", "America/New_York", "2024-11-03", "01:30", "2024-11-03T05:30:00Z", "2024-11-03T06:30:00Z"},
		// 02:00 CET jumps to 03:00 CEST (01:00Z).
		{"Paris spring-forward gap", "Europe/Paris", "2024-03-31", "02:30", "2024-03-31T01:00:00Z", ""},
		// 03:00 CEST falls back to 02:00 CET (01:00Z): 02:30 occurs at 00:30Z and 01:30Z.
		{"Paris fall-back overlap", "Europe/Paris", "2024-10-27", "02:30", "2024-10-27T00:30:00Z", "2024-10-27T01:30:00Z"},
		{"Paris day after fall-back", "Europe/Paris", "2024-10-28", "02:30", "2024-10-28T01:30:00Z", ""},
		// Lord Howe's clocks move by 30 minutes: 02:00 (+10:30) jumps to 02:30 (+11) at
		// 2024-10-05T15:30Z, and 02:00 (+11) falls back to 01:30 (+10:30) at 2024-04-06T15:00Z.
		{"Lord Howe spring-forward gap", "Australia/Lord_Howe", "2024-10-06", "02:15", "2024-10-05T15:30:00Z", ""},
		{"Lord Howe fall-back overlap", "Australia/Lord_Howe", "2024-04-07", "01:45", "2024-04-06T14:45:00Z", "2024-04-06T15:15:00Z"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			db := roundsDB(t)
			g, p := group(t, db, tc.zone, tc.drop, 1)
			insertScheduledRound(t, db, g, p[0], tc.date)
			opens := mustTime(t, tc.opens)

			before := runJob(t, NewRoundsOpen(), roundsEnv(db, opens.Add(-time.Second), nil))
			assert.Zero(t, before.Changed, "one second before the drop instant")
			assert.Equal(t, "scheduled", rounds(t, db, g)[0].Status)

			at := runJob(t, NewRoundsOpen(), roundsEnv(db, opens, nil))
			assert.Equal(t, int64(1), at.Changed, "at the drop instant")
			r := rounds(t, db, g)[0]
			assert.Equal(t, "open", r.Status)
			require.NotNil(t, r.OpenAt)
			require.NotNil(t, r.CloseAt)
			assert.True(t, opens.Equal(*r.OpenAt), "open_at %s, want %s", r.OpenAt, opens)
			assert.True(t, opens.Add(24*time.Hour).Equal(*r.CloseAt), "close_at %s, want open_at + 24 h", r.CloseAt)

			if tc.again != "" {
				again := runJob(t, NewRoundsOpen(), roundsEnv(db, mustTime(t, tc.again), nil))
				assert.Zero(t, again.Changed, "the second occurrence of the drop time opens nothing")
				r2 := rounds(t, db, g)[0]
				assert.True(t, opens.Equal(*r2.OpenAt), "open_at moved to %s", r2.OpenAt)
			}
		})
	}
}

// TestRoundsOpenLateRuns checks rounds whose drop instant passed while no run happened:
// they open at the next run, including in the second pass of a fall-back hour, where the
// group's clock reads earlier than the drop time again.
func TestRoundsOpenLateRuns(t *testing.T) {
	t.Parallel()
	db := roundsDB(t)
	paris, pp := group(t, db, "Europe/Paris", "02:30", 1)
	insertScheduledRound(t, db, paris, pp[0], "2024-10-27")
	old, po := group(t, db, "UTC", "09:00", 1)
	insertScheduledRound(t, db, old, po[0], "2024-10-20")
	future, pf := group(t, db, "Pacific/Kiritimati", "09:00", 1)
	insertScheduledRound(t, db, future, pf[0], "2024-10-28") // opens 2024-10-27T19:00Z
	// 01:10Z is 02:10 CET, the second pass of the hour: the clock reads before 02:30, yet
	// 02:30 CEST (00:30Z) has passed.
	now := mustTime(t, "2024-10-27T01:10:00Z")

	stats := runJob(t, NewRoundsOpen(), roundsEnv(db, now, nil))

	assert.Equal(t, int64(2), stats.Changed)
	assert.Equal(t, "open", rounds(t, db, paris)[0].Status)
	assert.Equal(t, "open", rounds(t, db, old)[0].Status)
	assert.Equal(t, "scheduled", rounds(t, db, future)[0].Status)
}

func TestRoundsOpenIsIdempotentAndBatched(t *testing.T) {
	t.Parallel()
	db := roundsDB(t)
	now := mustTime(t, "2024-06-01T12:00:00Z")
	var due, notDue []int64
	for i := range 5 {
		g, p := group(t, db, "Europe/Berlin", "09:00", 1)
		insertScheduledRound(t, db, g, p[0], fmt.Sprintf("2024-05-%02d", 28+i%4))
		due = append(due, g)
		g, p = group(t, db, "Europe/Berlin", "18:00", 1)
		insertScheduledRound(t, db, g, p[0], "2024-06-01")
		notDue = append(notDue, g)
	}
	j := &roundsOpen{batchSize: 3}

	first := runJob(t, j, roundsEnv(db, now, nil))
	second := runJob(t, j, roundsEnv(db, now.Add(5*time.Minute), nil))

	assert.Equal(t, int64(10), first.Processed)
	assert.Equal(t, int64(5), first.Changed)
	assert.Zero(t, second.Changed, "a second run changes nothing")
	for _, g := range due {
		r := rounds(t, db, g)[0]
		assert.Equal(t, "open", r.Status)
		assert.True(t, now.Equal(*r.OpenAt), "open_at is the first run's clock")
	}
	for _, g := range notDue {
		assert.Equal(t, "scheduled", rounds(t, db, g)[0].Status)
	}
}

func TestRoundsOpenDryRunChangesNothing(t *testing.T) {
	t.Parallel()
	db := roundsDB(t)
	g, p := group(t, db, "UTC", "09:00", 1)
	insertScheduledRound(t, db, g, p[0], "2024-06-01")
	env := roundsEnv(db, mustTime(t, "2024-06-01T10:00:00Z"), nil)
	env.Params.DryRun = true

	stats := runJob(t, NewRoundsOpen(), env)

	assert.Equal(t, int64(1), stats.Changed, "a dry run counts what it would open")
	assert.Equal(t, "scheduled", rounds(t, db, g)[0].Status)
}

func TestRoundsOpenSkipsLockedGroups(t *testing.T) {
	t.Parallel()
	db := roundsDB(t)
	ctx := context.Background()
	locked, pl := group(t, db, "UTC", "09:00", 1)
	insertScheduledRound(t, db, locked, pl[0], "2024-06-01")
	free, pf := group(t, db, "UTC", "09:00", 1)
	insertScheduledRound(t, db, free, pf[0], "2024-06-01")
	holder, err := db.Pool.Begin(ctx)
	require.NoError(t, err)
	defer holder.Rollback(ctx)
	_, err = holder.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtextextended('rounds-open:' || $1::bigint, 0))`, locked)
	require.NoError(t, err)

	stats := runJob(t, NewRoundsOpen(), roundsEnv(db, mustTime(t, "2024-06-01T10:00:00Z"), nil))

	assert.Equal(t, int64(1), stats.SkippedLocked)
	assert.Equal(t, int64(1), stats.Changed)
	assert.Equal(t, "scheduled", rounds(t, db, locked)[0].Status)
	assert.Equal(t, "open", rounds(t, db, free)[0].Status)
}

func TestRoundsOpenSkipsGroupsWithAnInvalidTimeZone(t *testing.T) {
	t.Parallel()
	db := roundsDB(t)
	ctx := context.Background()
	good, pg := group(t, db, "Asia/Kathmandu", "09:00", 1)
	insertScheduledRound(t, db, good, pg[0], "2024-06-01")
	bad, pb := group(t, db, "UTC", "09:00", 1)
	badRound := insertScheduledRound(t, db, bad, pb[0], "2024-06-01")
	// The zone went bad after the round was created (a bad import, a typo in an admin tool).
	_, err := db.Pool.Exec(ctx, `UPDATE groups SET timezone = 'Europe/Atlantis' WHERE id = $1`, bad)
	require.NoError(t, err)
	logs := &logBuffer{}

	stats := runJob(t, NewRoundsOpen(), roundsEnv(db, mustTime(t, "2024-06-01T10:00:00Z"), logs))

	assert.Equal(t, int64(1), stats.Errors)
	assert.Equal(t, int64(1), stats.Detail[detailBadTimezone])
	assert.Equal(t, int64(1), stats.Changed)
	assert.Equal(t, "open", rounds(t, db, good)[0].Status)
	assert.Equal(t, "scheduled", rounds(t, db, bad)[0].Status)
	assert.Contains(t, logs.String(), fmt.Sprintf("group_id=%d round_id=%d timezone=Europe/Atlantis", bad, badRound))
}

// TestDropInstantIsTheFirstInstantTheClockReachesTheDropTime checks dropInstant over every
// day of a year in zones with DST rules of every shape, at drop times every 15 minutes: the
// clock reads the drop time or later at the instant, and it reads exactly the drop time
// unless the instant is the end of a gap. Near a transition it also checks, minute by
// minute over the 3 hours before (no zone shifts by more than 2 hours), that the clock
// never read the drop time earlier: a fall-back drop time opens at its first occurrence.
func TestDropInstantIsTheFirstInstantTheClockReachesTheDropTime(t *testing.T) {
	t.Parallel()
	zones := []string{
		"UTC", "America/New_York", "Europe/Paris", "Australia/Lord_Howe", "Pacific/Chatham",
		"America/Santiago", "Asia/Tehran", "Africa/Casablanca", "Antarctica/Troll",
		"America/Havana", "Pacific/Kiritimati", "Asia/Kathmandu",
	}
	const lookBack = 3 * time.Hour
	for _, zone := range zones {
		loc, err := time.LoadLocation(zone)
		require.NoError(t, err)
		for day := time.Date(2022, 1, 1, 0, 0, 0, 0, time.UTC); day.Year() == 2022; day = day.AddDate(0, 0, 1) {
			for clock := time.Duration(0); clock < 24*time.Hour; clock += 15 * time.Minute {
				at := dropInstant(day, clock, loc)
				want := day.Add(clock)
				reads := wallClock(at, loc)
				fail := func(msg string) {
					t.Fatalf("%s %s %s: dropInstant = %s, reading %s: %s",
						zone, day.Format("2006-01-02"), clock, at, reads, msg)
				}
				if reads.Before(want) {
					fail("the clock has not reached the drop time yet")
				}
				start, end := at.In(loc).ZoneBounds()
				if !reads.Equal(want) && !at.Equal(start) {
					fail("later than the drop time without being the end of a gap")
				}
				if start.After(at.Add(-lookBack)) || (!end.IsZero() && end.Before(at.Add(lookBack))) {
					for earlier := at.Add(-time.Second); earlier.After(at.Add(-lookBack)); earlier = earlier.Add(-time.Minute) {
						if !wallClock(earlier, loc).Before(want) {
							fail(fmt.Sprintf("the clock already read %s at %s", wallClock(earlier, loc), earlier))
						}
					}
				}
			}
		}
	}
}

// wallClock is what loc's clocks read at t, as a UTC reading.
func wallClock(t time.Time, loc *time.Location) time.Time {
	l := t.In(loc)
	return time.Date(l.Year(), l.Month(), l.Day(), l.Hour(), l.Minute(), l.Second(), 0, time.UTC)
}
