package engine

import (
	"context"
	"sort"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schedulerhq/scheduler/internal/config"
	"github.com/schedulerhq/scheduler/internal/store"
	"github.com/schedulerhq/scheduler/internal/store/storetest"
	"github.com/schedulerhq/scheduler/internal/testdb"
)

// requireOneRowPerSlot asserts that job's history is one row per one-second slot: from its
// first slot to its last, every slot has exactly one row.
func requireOneRowPerSlot(t *testing.T, db *testdb.DB, job string) []*store.Run {
	t.Helper()
	var runs []*store.Run
	for _, r := range runsOf(t, db, job) {
		if r.ScheduledAt != nil {
			runs = append(runs, r)
		}
	}
	require.NotEmpty(t, runs)
	sort.Slice(runs, func(i, j int) bool { return runs[i].ScheduledAt.Before(*runs[j].ScheduledAt) })
	first := *runs[0].ScheduledAt
	for i, r := range runs {
		require.Equal(t, first.Add(time.Duration(i)*time.Second), *r.ScheduledAt,
			"slot %d: every slot from the first to the last has exactly one row (got %s, status %s)", i, r.ScheduledAt, r.Status)
	}
	return runs
}

// startTicking starts a leading node whose job "tick" runs every second, with a fault tracer,
// and waits until two runs have succeeded.
func startTicking(t *testing.T) (*faultTracer, *testdb.DB, *node) {
	t.Helper()
	faults := newFaultTracer()
	db, url := newDB(t)
	n := startNode(t, url, "a", nodeOptions{jobs: []config.Job{jobConfig(t, "tick", "@every 1s", time.Minute)}, tracer: faults})
	awaitSignal(t, &n.en.testSignals.leading, "leading")
	require.Eventually(t, func() bool {
		return count(t, db, `SELECT count(*) FROM job_runs WHERE job = 'tick' AND status = 'succeeded'`) >= 2
	}, waitTimeout, 20*time.Millisecond)
	return faults, db, n
}

// Guarantee 10, at the claim: a claim that fails once is retried within its slot's period,
// so the slot still runs and no slot is lost.
func TestFailedClaimIsRetried(t *testing.T) {
	t.Parallel()
	faults, db, n := startTicking(t)

	faults.fail(faultClaim, 1)
	awaitFault(t, faults, "a claim to fail")
	faultAt := time.Now()
	require.Eventually(t, func() bool {
		return count(t, db, `SELECT count(*) FROM job_runs WHERE job = 'tick' AND created_at > $1`, faultAt) >= 3
	}, waitTimeout, 20*time.Millisecond)
	n.stop()

	runs := requireOneRowPerSlot(t, db, "tick")
	for _, r := range runs[:len(runs)-1] { // the last may have been interrupted by the stop
		assert.Equal(t, store.StatusSucceeded, r.Status, "slot %s", r.ScheduledAt)
	}
}

// Guarantee 10, at the claim: a slot whose claim keeps failing past its period is recorded
// missed as soon as the database answers again, never silently dropped.
func TestUnclaimableSlotIsRecordedMissed(t *testing.T) {
	t.Parallel()
	faults, db, n := startTicking(t)

	faults.fail(faultClaim, 1_000_000)
	awaitFault(t, faults, "a claim to fail")
	time.Sleep(2500 * time.Millisecond) // the outage, not a synchronisation: every claim fails for two periods and more
	faults.fail(faultClaim, -1_000_000)
	healedAt := time.Now()
	require.Eventually(t, func() bool {
		return count(t, db, `SELECT count(*) FROM job_runs WHERE job = 'tick' AND status = 'succeeded' AND created_at > $1`, healedAt) >= 2
	}, waitTimeout, 20*time.Millisecond)
	n.stop()

	missed := 0
	for _, r := range requireOneRowPerSlot(t, db, "tick") {
		if r.Status == store.StatusMissed {
			missed++
		}
	}
	assert.GreaterOrEqual(t, missed, 2, "the slots of the outage are recorded missed")
}

// Guarantee 3: catch-up records the unclaimed slots inside its window wherever they are, not
// only the tail after the latest recorded slot.
func TestCatchUpRecordsGapsNotOnlyTheTail(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, url := newDB(t)
	hourly := jobConfig(t, "tick", "@every 1h", time.Minute)
	now, err := db.Now(ctx)
	require.NoError(t, err)
	latest := hourly.Schedule.Prev(now)
	gap := latest.Add(-3 * time.Hour)
	for k := 0; k <= 5; k++ {
		slot := latest.Add(-time.Duration(k) * time.Hour)
		if slot.Equal(gap) {
			continue
		}
		storetest.Run(ctx, t, db.Pool, storetest.RunOpts{Job: "tick", Status: store.StatusSucceeded, ScheduledAt: slot,
			StartedAt: slot, FinishedAt: slot, InstanceID: "old", Epoch: storetest.Ptr(int64(0))})
	}
	n := startNode(t, url, "a", nodeOptions{jobs: []config.Job{hourly}})
	awaitSignal(t, &n.en.testSignals.leading, "leading")

	var status string
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT status FROM job_runs WHERE job = 'tick' AND scheduled_at = $1`, gap).Scan(&status),
		"the gap before the latest recorded slot has a row")
	assert.Equal(t, store.StatusMissed, status)
	assert.Equal(t, 6, count(t, db, `SELECT count(*) FROM job_runs WHERE job = 'tick'`))
}

// Guarantee 3: catch-up walks back at most the cap of missed rows per job (a job whose slot
// was last seen years ago must not hold up the election by stepping through every second since).
func TestCatchUpAfterALongOutageIsBoundedByTheCap(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, url := newDB(t)
	now, err := db.Now(ctx)
	require.NoError(t, err)
	slot := now.Truncate(time.Second).AddDate(-20, 0, 0)
	storetest.Run(ctx, t, db.Pool, storetest.RunOpts{Job: "tick", Status: store.StatusSucceeded, ScheduledAt: slot,
		StartedAt: slot, FinishedAt: slot, InstanceID: "old", Epoch: storetest.Ptr(int64(0))})
	n := startNode(t, url, "a", nodeOptions{jobs: []config.Job{jobConfig(t, "tick", "@every 1s", time.Minute)}, maxMissed: 5})
	awaitSignal(t, &n.en.testSignals.leading, "leading after catching up")
	assert.Equal(t, 5, count(t, db, `SELECT count(*) FROM job_runs WHERE job = 'tick' AND status = 'missed'`),
		"the missed rows stop at the cap")
}

// Slots are computed on the leader's clock, but a slot is claimed only once it has come by
// the database's: a leader whose clock runs ahead waits instead of starting the run early.
func TestASlotStillInTheFutureByTheDatabaseClockIsClaimedWhenItComes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, url := newDB(t)
	n := startNode(t, url, "a", nodeOptions{jobs: []config.Job{manualOnly(t, "tick", time.Minute)}})
	term := awaitTerm(t, n)
	awaitSignal(t, &n.en.testSignals.leading, "leading")
	var dbNow time.Time
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT now()`).Scan(&dbNow))
	// As if this replica's clock ran two seconds ahead: its timer names a slot that the
	// database has not reached.
	slot := dbNow.Truncate(time.Second).Add(2 * time.Second)
	claims := newClaimer(n.en, term)
	go claims.run(term.Ctx)
	n.en.tick(term.Ctx, term, claims, n.en.log, n.en.jobs["tick"], slot, store.TriggerSchedule, 0)

	var run *store.Run
	for _, r := range runsOf(t, db, "tick") {
		if r.ScheduledAt != nil && r.ScheduledAt.Equal(slot) {
			run = r
		}
	}
	require.NotNil(t, run, "the slot was claimed")
	require.NotNil(t, run.StartedAt)
	assert.False(t, run.StartedAt.Before(slot), "started %s, before its slot %s by the database clock",
		run.StartedAt.UTC(), slot.UTC())
}
