package engine

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// planAt is the plan of a job on every minute whose first recorded slot is first, at now,
// with the slots recorded.
func planAt(t *testing.T, j catchUpJob, now time.Time, recorded ...time.Time) ([]time.Time, catchUpPlan) {
	t.Helper()
	walk := catchUpWalk(j, now)
	if walk == nil {
		return nil, catchUpPlan{}
	}
	rec := map[int64]bool{}
	for _, s := range recorded {
		rec[s.Unix()] = true
	}
	return walk, planCatchUp(j, walk, rec, now)
}

// minutes returns the n slots of a job on every minute from from on.
func minutes(from time.Time, n int) []time.Time {
	out := make([]time.Time, n)
	for i := range out {
		out[i] = from.Add(time.Duration(i) * time.Minute)
	}
	return out
}

// Guarantee 3, planned without a database: after 200 minutes without a leader, the
// catch-up looks at the latest slot and the 100 before it (the cap), runs the latest once and
// records exactly the 100 others missed; the slots before the cap are not looked at.
func TestCatchUpPlanAfterALongOutageMissesExactlyTheCap(t *testing.T) {
	t.Parallel()
	latest := time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC)
	j := catchUpJob{sched: jobConfig(t, "tick", "* * * * *", time.Minute).Schedule, first: latest.Add(-200 * time.Minute),
		window: 5 * time.Minute, maxMissed: 100}
	walk, p := planAt(t, j, latest.Add(30*time.Second), j.first)

	require.Len(t, walk, 101)
	assert.Equal(t, latest, p.latest)
	assert.True(t, p.run, "the latest slot, within its window, runs")
	assert.Equal(t, minutes(latest.Add(-100*time.Minute), 100), p.missed, "the 100 slots before the latest, oldest first")
	assert.Empty(t, p.repair)
}

// The walk finds gaps between recorded slots, not only the tail after the latest row, and a
// latest slot past its window is recorded missed rather than run.
func TestCatchUpPlanFindsGapsAndMissesALatestSlotPastItsWindow(t *testing.T) {
	t.Parallel()
	latest := time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC)
	first := latest.Add(-10 * time.Minute)
	j := catchUpJob{sched: jobConfig(t, "tick", "* * * * *", time.Minute).Schedule, first: first, window: 30 * time.Second, maxMissed: 100}
	recorded := minutes(first, 10) // every slot but the latest…
	gaps := []time.Time{recorded[3], recorded[7]}
	recorded = append(append(append([]time.Time{}, recorded[:3]...), recorded[4:7]...), recorded[8:]...) // …and two gaps
	_, p := planAt(t, j, latest.Add(45*time.Second), recorded...)

	assert.False(t, p.run, "45 s after it, a slot with a window of 30 s does not run")
	assert.Equal(t, append(gaps, latest), p.missed)

	_, p = planAt(t, catchUpJob{sched: j.sched, first: first, maxMissed: 100}, latest.Add(time.Second), minutes(first, 10)...)
	assert.False(t, p.run, "a job without a catch-up window never catches up")
	assert.Equal(t, []time.Time{latest}, p.missed)
}

// A job with no recorded slot has no known gap; a definition newer than the latest slot has
// nothing to decide; a recorded latest slot neither runs nor misses.
func TestCatchUpPlanLooksOnlyWhereTheJobHadSlots(t *testing.T) {
	t.Parallel()
	latest := time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC)
	sched := jobConfig(t, "tick", "* * * * *", time.Minute).Schedule
	now := latest.Add(10 * time.Second)

	walk, p := planAt(t, catchUpJob{sched: sched, window: time.Minute, maxMissed: 100}, now)
	assert.Equal(t, []time.Time{latest}, walk)
	assert.True(t, p.run)
	assert.Empty(t, p.missed)

	walk, _ = planAt(t, catchUpJob{sched: sched, since: latest.Add(time.Second), window: time.Minute, maxMissed: 100}, now)
	assert.Nil(t, walk, "the latest slot was another definition's")

	walk, p = planAt(t, catchUpJob{sched: sched, since: latest.Add(-2 * time.Minute), first: latest.Add(-time.Hour), window: time.Minute, maxMissed: 100}, now, latest)
	assert.Equal(t, []time.Time{latest, latest.Add(-time.Minute), latest.Add(-2 * time.Minute)}, walk, "not before the definition")
	assert.False(t, p.run)
	assert.Equal(t, []time.Time{latest.Add(-2 * time.Minute), latest.Add(-time.Minute)}, p.missed)
}

// After a failover, every unrecorded slot from repairFrom on is the repair's, past the cap,
// and only the older ones are recorded missed.
func TestCatchUpPlanLeavesTheFailoverWindowToTheRepair(t *testing.T) {
	t.Parallel()
	latest := time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC)
	j := catchUpJob{sched: jobConfig(t, "tick", "* * * * *", time.Minute).Schedule, first: latest.Add(-time.Hour),
		window: time.Minute, maxMissed: 3, repairFrom: latest.Add(-time.Minute)}
	walk, p := planAt(t, j, latest.Add(time.Second), j.first)
	require.Len(t, walk, 4, "the latest slot and the cap's 3")
	assert.False(t, p.run, "the latest slot is in the repair's window")
	assert.Equal(t, minutes(latest.Add(-time.Minute), 2), p.repair)
	assert.Equal(t, minutes(latest.Add(-3*time.Minute), 2), p.missed)

	j.repairFrom = latest.Add(-6 * time.Minute)
	walk, p = planAt(t, j, latest.Add(time.Second), j.first)
	require.Len(t, walk, 7, "past the cap, down to repairFrom")
	assert.Equal(t, minutes(latest.Add(-6*time.Minute), 7), p.repair)
	assert.Empty(t, p.missed)
}
