package engine

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schedulerhq/scheduler/internal/config"
	"github.com/schedulerhq/scheduler/internal/store"
	"github.com/schedulerhq/scheduler/internal/testdb"
)

// awaitFault waits until the tracer has injected a fault.
func awaitFault(t *testing.T, f *faultTracer, what string) {
	t.Helper()
	select {
	case <-f.hit:
	case <-time.After(waitTimeout):
		t.Fatalf("timed out after %s waiting for %s", waitTimeout, what)
	}
}

// requireOneRowPerSlot checks guarantee 10 for an "@every 1s" job: from its first slot to
// Guarantee 10, at the finish: a finish that fails while this replica still leads is
// Guarantee 10, during a term: a running row of this term that no goroutine of this replica
// owns (a claim whose commit reached the server while its answer was lost) is marked
// Guarantee 10, at the claim: a claim that fails once is retried within its slot's period,
// Guarantee 10: a slot whose claim keeps failing for its whole period is recorded missed as
// Guarantee 3: catch-up at an election finds the gaps inside the walk back from now, not
// Guarantee 3 after a long outage: the catch-up walks back from now at most the missed-row
// cap, whatever the number of periods since the last recorded slot (a job on "@every 1s"
// terminate kills the backends of db's cluster that match where (a condition on
// pg_stat_activity) in the test's database, as a DBA or a failover tool would, and
// returns how many it killed.
func terminate(t *testing.T, db *testdb.DB, where string, args ...any) int {
	t.Helper()
	return count(t, db, `
		SELECT count(*) FILTER (WHERE pg_terminate_backend(pid)) FROM pg_stat_activity
		WHERE datname = current_database() AND pid <> pg_backend_pid() AND `+where, args...)
}

// Guarantees 1 and 6: the leader's lock session is killed while its job writes through
// live pool connections. A follower takes over at once; the deposed leader's writes fail
// at the fence (none of its epoch commits after the new epoch's since) and its run is
// recovered once by the new leader.
func TestKilledLockSessionMovesLeadership(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, url := newDB(t)
	opts := nodeOptions{jobs: []config.Job{manualOnly(t, "writer", time.Minute)}}
	a := startNode(t, url, "a", opts)
	oldTerm := awaitTerm(t, a)
	awaitSignal(t, &a.en.testSignals.leading, "a leading")
	b := startNode(t, url, "b", opts)
	id := queueRun(t, db, "writer")
	require.Eventually(t, func() bool {
		return count(t, db, `SELECT count(*) FROM test_calls WHERE run_id = $1`, id) >= 20
	}, waitTimeout, 10*time.Millisecond, "the writer is writing")

	require.Equal(t, 1, terminate(t, db, `pid IN (SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND granted)`),
		"the leader's lock session")

	newTerm := awaitTerm(t, b)
	assert.Greater(t, newTerm.Epoch, oldTerm.Epoch)
	awaitSignal(t, &a.en.testSignals.interrupted, "the deposed leader's run to be interrupted")
	row, err := db.Leader(ctx)
	require.NoError(t, err)
	assert.Zero(t, count(t, db, `SELECT count(*) FROM test_calls WHERE epoch < $1 AND written_at >= $2`, newTerm.Epoch, row.Since),
		"a write of the old epoch committed after the new leader's since")

	awaitStatus(t, db, id, store.StatusAbandoned)
	var recovery int64
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT id FROM job_runs WHERE recovers_run_id = $1`, id).Scan(&recovery))
	awaitStatus(t, db, recovery, store.StatusRunning)
	assert.Equal(t, newTerm.Epoch, *getRun(t, db, recovery).Epoch)
}

// Guarantee 10: the backend of a running job's pool connection is killed mid-transaction.
// The run ends failed (its body saw the error), recorded by the leader; it is not left
// running.
func TestKilledJobBackendFailsTheRun(t *testing.T) {
	t.Parallel()
	db, url := newDB(t)
	n := startNode(t, url, "a", nodeOptions{jobs: []config.Job{manualOnly(t, "writer", time.Minute)}})
	awaitSignal(t, &n.en.testSignals.leading, "leading")
	id := queueRun(t, db, "writer")
	require.Eventually(t, func() bool {
		return count(t, db, `SELECT count(*) FROM test_calls WHERE run_id = $1`, id) >= 20
	}, waitTimeout, 10*time.Millisecond, "the writer is writing")

	require.Eventually(t, func() bool {
		return terminate(t, db, `application_name = 'scheduler:a' AND state <> 'idle' AND query LIKE '%test_calls%'`) > 0
	}, waitTimeout, time.Millisecond, "a backend in one of the writer's transactions")

	r := awaitFinished(t, db, id)
	assert.Equal(t, store.StatusFailed, r.Status)
	assert.Contains(t, *r.Error, "terminat")
	isLeader, _ := n.el.IsLeader()
	assert.True(t, isLeader, "a job's broken connection does not cost the leadership")
}

// Guarantee 10, in the job's transaction: a transient error there is the body's error; the
// run ends failed, recorded once, and the next run of the job is not blocked.
func TestTransientErrorInTheJobTransactionFailsTheRun(t *testing.T) {
	t.Parallel()
	faults := newFaultTracer()
	db, url := newDB(t)
	n := startNode(t, url, "a", nodeOptions{jobs: []config.Job{manualOnly(t, "tick", time.Minute)}, tracer: faults})
	awaitSignal(t, &n.en.testSignals.leading, "leading")

	faults.fail(faultJobTx, 1)
	id := queueRun(t, db, "tick")
	awaitFault(t, faults, "the job's transaction to fail")
	r := awaitFinished(t, db, id)
	assert.Equal(t, store.StatusFailed, r.Status)
	assert.Zero(t, count(t, db, `SELECT count(*) FROM test_calls WHERE run_id = $1`, id), "the failed transaction committed nothing")

	next := queueRun(t, db, "tick")
	awaitStatus(t, db, next, store.StatusSucceeded)
}
