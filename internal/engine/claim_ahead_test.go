package engine

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schedulerhq/scheduler/internal/config"
	"github.com/schedulerhq/scheduler/internal/metrics"
	"github.com/schedulerhq/scheduler/internal/testmetrics"
)

// Slots claimed ahead: the timer fires a quarter of the period before each slot (here
// 500 ms before each slot of "*/2 * * * * *"), the claim wins, and the job's body still
// begins at the slot or after it by the database's clock, never before; the run's
// started_at is not before the slot either.
func TestClaimAheadStartsTheRunAtItsSlot(t *testing.T) {
	t.Parallel()
	db, url := newDB(t)
	n := startNode(t, url, "a", nodeOptions{jobs: []config.Job{jobConfig(t, "tick", "*/2 * * * * *", time.Minute)},
		claimAheadFrom: time.Second})
	awaitTerm(t, n)
	var slots []time.Time
	for len(slots) < 3 {
		for _, c := range awaitSignal(t, &n.en.testSignals.claimBatch, "a batch of claims") {
			if c.Job == "tick" && c.Ahead > 0 {
				assert.Equal(t, 500*time.Millisecond, c.Ahead)
				slots = append(slots, c.ScheduledAt)
			}
		}
	}
	last := slots[len(slots)-1]
	for count(t, db, `SELECT count(*) FROM test_calls c JOIN job_runs r ON r.id = c.run_id WHERE r.scheduled_at = $1`, last) == 0 {
		awaitSignal(t, &n.en.testSignals.finished, "the last slot's run finishing")
	}
	for _, slot := range slots {
		// started_at is the slot, or later when the claim itself began after the slot (a
		// loaded machine can delay it past the lead).
		assert.Equal(t, 1, count(t, db, `SELECT count(*) FROM job_runs WHERE job = 'tick' AND scheduled_at = $1 AND started_at >= $1`, slot),
			"slot %s: one run, started no earlier than its slot", slot)
		assert.Equal(t, 1, count(t, db, `SELECT count(*) FROM test_calls c JOIN job_runs r ON r.id = c.run_id
			WHERE r.scheduled_at = $1 AND c.written_at >= $1`, slot),
			"slot %s: its body began at the slot or after it by the database's clock", slot)
	}
}

// A term that starts within the lead of a slot claims that slot: the timer's firing for it
// has passed, and the catch-up claims only slots that have come. The node starts 300 ms
// before a slot of "*/2 * * * * *" (lead 500 ms) by the database's clock.
func TestTermStartingWithinTheLeadClaimsTheSlot(t *testing.T) {
	t.Parallel()
	db, url := newDB(t)
	var now time.Time
	require.NoError(t, db.Pool.QueryRow(context.Background(), `SELECT clock_timestamp()`).Scan(&now))
	slot := now.Truncate(2 * time.Second).Add(4 * time.Second)
	time.Sleep(slot.Add(-300 * time.Millisecond).Sub(now)) // the input: when the node starts
	n := startNode(t, url, "a", nodeOptions{jobs: []config.Job{jobConfig(t, "tick", "*/2 * * * * *", time.Minute)},
		claimAheadFrom: time.Second})
	term := awaitTerm(t, n)
	if !term.Since.Before(slot) {
		t.Skipf("the term began at %s, after the slot %s: the catch-up claims it, as before", term.Since, slot)
	}
	for count(t, db, `SELECT count(*) FROM job_runs WHERE job = 'tick' AND scheduled_at > $1`, slot) == 0 {
		awaitSignal(t, &n.en.testSignals.finished, "a run of a later slot finishing")
	}
	assert.Equal(t, 1, count(t, db, `SELECT count(*) FROM job_runs WHERE job = 'tick' AND scheduled_at = $1`, slot),
		"the slot 300 ms after the term's start has its run")
}

// A claim made ahead that commits after its slot (here held up by the lock every claim
// takes, released 300 ms after the slot) starts its run late, and the schedule-delay
// metric says how late, although the run's started_at may be the slot.
func TestClaimAheadCommittedAfterItsSlotReportsItsDelay(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, url := newDB(t)
	m := metrics.New()
	n := startNode(t, url, "a", nodeOptions{jobs: []config.Job{jobConfig(t, "tick", "*/2 * * * * *", time.Minute)},
		claimAheadFrom: time.Second, metrics: m})
	awaitTerm(t, n)
	for ahead := false; !ahead; { // past the term's catch-up: the timers claim ahead
		for _, c := range awaitSignal(t, &n.en.testSignals.claimBatch, "a batch of claims") {
			ahead = ahead || c.Ahead > 0
		}
	}
	// The lead of a 2 s schedule is 500 ms. The lock is kept only when the next slot's timer
	// is at least 200 ms away and that slot has no row yet, so its claim is the one held;
	// otherwise the test tries again 800 ms into the next period, a few times at most. The
	// hold stays under the period: the slot before the held one has its run and its end
	// recorded meanwhile.
	var slot time.Time
	for try := 1; slot.IsZero(); try++ {
		require.LessOrEqual(t, try, 5, "no slot could be held before its timer fired")
		tx, err := db.Pool.Begin(ctx)
		require.NoError(t, err)
		var now time.Time
		require.NoError(t, tx.QueryRow(ctx, `SELECT clock_timestamp() FROM scheduler_locks WHERE name = 'scheduler:active_runs' FOR UPDATE`).Scan(&now))
		next := now.Truncate(2 * time.Second).Add(2 * time.Second)
		if next.Sub(now) >= 700*time.Millisecond &&
			count(t, db, `SELECT count(*) FROM job_runs WHERE job = 'tick' AND scheduled_at = $1`, next) == 0 {
			slot = next
			time.Sleep(slot.Add(300 * time.Millisecond).Sub(now)) // the input: the claim is held past the slot
			require.NoError(t, tx.Commit(ctx))
		} else {
			require.NoError(t, tx.Rollback(ctx))
			time.Sleep(next.Add(800 * time.Millisecond).Sub(now))
		}
	}
	for count(t, db, `SELECT count(*) FROM job_runs WHERE job = 'tick' AND scheduled_at = $1 AND finished_at IS NOT NULL`, slot) == 0 {
		awaitSignal(t, &n.en.testSignals.finished, "the held slot's run finishing")
	}
	var status string
	var reason *string
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT status, reason FROM job_runs WHERE job = 'tick' AND scheduled_at = $1`, slot).Scan(&status, &reason))
	require.Equal(t, "succeeded", status, "the held slot's run (reason %v)", reason)
	delays := testmetrics.Series(testmetrics.Scrape(t, m), "scheduler_schedule_delay_seconds", map[string]string{"job_name": "tick"}).GetHistogram()
	var within250ms uint64
	for _, b := range delays.GetBucket() {
		if b.GetUpperBound() == 0.25 {
			within250ms = b.GetCumulativeCount()
		}
	}
	assert.Less(t, within250ms, delays.GetSampleCount(), "a run began more than 250 ms after its slot, and the metric says so")
}

// A run claimed ahead has its whole timeout from its slot: the wait for the slot does not
// count, in its timeout or in its duration. Here the lead is a second and the timeout
// 600 ms, and the job blocks until its timeout: its body must run about 600 ms, not time
// out at once, and its duration must be about 600 ms, not 1.6 s with the wait.
func TestClaimAheadRunHasItsWholeTimeoutFromItsSlot(t *testing.T) {
	t.Parallel()
	db, url := newDB(t)
	m := metrics.New()
	n := startNode(t, url, "a", nodeOptions{jobs: []config.Job{jobConfig(t, "slow", "*/4 * * * * *", 600*time.Millisecond)},
		claimAheadFrom: time.Second, metrics: m})
	awaitTerm(t, n)
	// The second slot claimed ahead: the first may come while the term's catch-up run still
	// runs, and be skipped as an overlap.
	var slots []time.Time
	for len(slots) < 2 {
		for _, c := range awaitSignal(t, &n.en.testSignals.claimBatch, "a batch of claims") {
			if c.Job == "slow" && c.Ahead > 0 {
				assert.Equal(t, time.Second, c.Ahead)
				slots = append(slots, c.ScheduledAt)
			}
		}
	}
	slot := slots[1]
	for count(t, db, `SELECT count(*) FROM job_runs WHERE job = 'slow' AND scheduled_at = $1 AND finished_at IS NOT NULL`, slot) == 0 {
		awaitSignal(t, &n.en.testSignals.finished, "the run claimed ahead finishing")
	}
	// From the slot, not from the body's first write: on a loaded machine the body may begin
	// late, and then runs for less than its timeout; a timeout counted from the claim, a
	// second earlier, would end the run before its slot, or at once.
	var status string
	var ran time.Duration
	require.NoError(t, db.Pool.QueryRow(context.Background(), `
		SELECT r.status, r.finished_at - r.scheduled_at FROM job_runs r JOIN test_calls c ON c.run_id = r.id
		WHERE r.job = 'slow' AND r.scheduled_at = $1`, slot).Scan(&status, &ran))
	assert.Equal(t, "timed_out", status)
	assert.GreaterOrEqual(t, ran, 500*time.Millisecond, "the run had its timeout from the slot")
	durations := testmetrics.Series(testmetrics.Scrape(t, m), "scheduler_run_duration_seconds", map[string]string{"job_name": "slow"}).GetHistogram()
	require.NotZero(t, durations.GetSampleCount())
	for _, b := range durations.GetBucket() {
		if b.GetUpperBound() == 1 {
			assert.Equal(t, durations.GetSampleCount(), b.GetCumulativeCount(),
				"every run's duration counts from its slot (about 0.6 s), none from its claim a second before")
		}
	}
}
