package engine

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schedulerhq/scheduler/internal/config"
	"github.com/schedulerhq/scheduler/internal/store"
	"github.com/schedulerhq/scheduler/internal/store/storetest"
	"github.com/schedulerhq/scheduler/internal/testdb"
)

// awaitRescued waits for a rescuer pass that abandoned at least one run.
func awaitRescued(t *testing.T, n *node) {
	t.Helper()
	deadline := time.Now().Add(waitTimeout)
	for time.Now().Before(deadline) {
		if awaitSignal(t, &n.en.testSignals.rescued, "a rescuer pass") > 0 {
			return
		}
	}
	t.Fatalf("no rescuer pass abandoned a run within %s", waitTimeout)
}

// Guarantee 10, at the finish: a finish that fails while this replica still leads is
// retried, so the run ends recorded and the job's next runs are not blocked behind it.
func TestFailedFinishIsRetriedWhileTheTermLasts(t *testing.T) {
	t.Parallel()
	faults := newFaultTracer()
	db, url := newDB(t)
	n := startNode(t, url, "a", nodeOptions{jobs: []config.Job{manualOnly(t, "tick", time.Minute)}, tracer: faults})
	awaitSignal(t, &n.en.testSignals.leading, "leading")

	faults.fail(faultFinish, 2)
	id := queueRun(t, db, "tick")
	awaitFault(t, faults, "the finish to fail")
	awaitStatus(t, db, id, store.StatusSucceeded)
	assert.Equal(t, 1, count(t, db, `SELECT count(*) FROM test_calls WHERE run_id = $1`, id), "the body ran once")

	next := queueRun(t, db, "tick")
	awaitStatus(t, db, next, store.StatusSucceeded)
}

// Guarantee 10, during a term: a running row of this term that no goroutine of this replica
// owns (a claim whose commit reached the server while its answer was lost) is marked
// abandoned and recovered once by the leader's rescuer, not only at the next election.
func TestRescuerRecoversRunsNobodyOwns(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, url := newDB(t)
	n := startNode(t, url, "a", nodeOptions{
		jobs:           []config.Job{manualOnly(t, "tick", time.Minute), manualOnly(t, "slow", time.Minute)},
		rescueInterval: 100 * time.Millisecond,
	})
	term := awaitTerm(t, n)
	awaitSignal(t, &n.en.testSignals.leading, "leading")
	owned := queueRun(t, db, "slow")
	awaitStatus(t, db, owned, store.StatusRunning)

	now := time.Now()
	orphan := storetest.Run(ctx, t, db.Pool, storetest.RunOpts{Job: "tick", Status: store.StatusRunning,
		ScheduledAt: now.Truncate(time.Second), StartedAt: now, InstanceID: "a", Epoch: &term.Epoch}).ID

	awaitRescued(t, n)
	assert.Equal(t, store.StatusAbandoned, getRun(t, db, orphan).Status)
	var recovery int64
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT id FROM job_runs WHERE recovers_run_id = $1`, orphan).Scan(&recovery))
	awaitStatus(t, db, recovery, store.StatusSucceeded)
	awaitSignal(t, &n.en.testSignals.rescued, "another rescuer pass")
	assert.Equal(t, 1, count(t, db, `SELECT count(*) FROM job_runs WHERE trigger = 'recovery'`), "recovered once")
	assert.Equal(t, store.StatusRunning, getRun(t, db, owned).Status, "a run this replica owns is never rescued")
}

// Guarantee 10, at the claim: a claim that fails once is retried within its slot's period,
// Guarantee 10: a slot whose claim keeps failing for its whole period is recorded missed as
// Guarantee 3: catch-up at an election finds the gaps inside the walk back from now, not
// Guarantee 3 after a long outage: the catch-up walks back from now at most the missed-row
// cap, whatever the number of periods since the last recorded slot (a job on "@every 1s"

// Guarantees 5 and 10 on the engine's clock: the term's first rescuer pass abandons exactly
// the run an earlier epoch left running, at the clock's time, and queues exactly one
// recovery, which runs.
func TestRescuerOnTheClockAbandonsAnEarlierEpochsRun(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, url := newDB(t)
	slot := clockAt.Truncate(time.Minute).Add(-time.Minute)
	left := storetest.Run(ctx, t, db.Pool, storetest.RunOpts{Job: "tick", Status: store.StatusRunning,
		ScheduledAt: slot, StartedAt: slot, InstanceID: "gone", Epoch: storetest.Ptr(int64(0))}).ID

	n := startNode(t, url, "a", nodeOptions{jobs: []config.Job{manualOnly(t, "tick", time.Minute)}, now: clockAt})
	assert.Equal(t, 1, awaitSignal(t, &n.en.testSignals.rescued, "the term's first rescuer pass"), "one run abandoned")

	run := getRun(t, db, left)
	assert.Equal(t, store.StatusAbandoned, run.Status)
	require.NotNil(t, run.FinishedAt)
	assert.Equal(t, clockAt, run.FinishedAt.UTC(), "abandoned at the clock's time")
	var recovery int64
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT id FROM job_runs WHERE recovers_run_id = $1`, left).Scan(&recovery))
	awaitStatus(t, db, recovery, store.StatusSucceeded)
	assert.Equal(t, map[string]int{store.StatusAbandoned: 1, store.StatusSucceeded: 1, store.StatusMissed: 1}, statusCounts(t, db),
		"no other run: the missed one is the catch-up's, of the hourly job's latest slot, which has no catch-up window")
	assert.Equal(t, 1, count(t, db, `SELECT count(*) FROM job_runs WHERE status = 'missed' AND scheduled_at = $1`, clockAt.Truncate(time.Hour)))
}

// statusCounts counts every run by status.
func statusCounts(t *testing.T, db *testdb.DB) map[string]int {
	t.Helper()
	rows, err := db.Pool.Query(context.Background(), `SELECT status, count(*)::int FROM job_runs GROUP BY status`)
	require.NoError(t, err)
	out := map[string]int{}
	for rows.Next() {
		var s string
		var n int
		require.NoError(t, rows.Scan(&s, &n))
		out[s] = n
	}
	require.NoError(t, rows.Err())
	return out
}
