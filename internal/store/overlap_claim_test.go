package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schedulerhq/scheduler/internal/store"
	"github.com/schedulerhq/scheduler/internal/testdb"
)

// overlapFixture is a test database whose leader holds epoch 1, and the slots of an hour ago.
type overlapFixture struct {
	db   *testdb.DB
	base time.Time
}

func newOverlapFixture(t *testing.T) overlapFixture {
	db, _ := testdb.Open(t, store.Options{})
	ctx := context.Background()
	_, err := db.Pool.Exec(ctx, `UPDATE scheduler_leader SET epoch = 1`)
	require.NoError(t, err)
	var base time.Time
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT date_trunc('second', now()) - interval '1 hour'`).Scan(&base))
	return overlapFixture{db: db, base: base.UTC()}
}

func (f overlapFixture) claims(t *testing.T, claims ...store.Claim) []store.ClaimOutcome {
	t.Helper()
	ctx := context.Background()
	var out []store.ClaimOutcome
	require.NoError(t, f.db.Fenced(ctx, store.Fence{Epoch: 1}, func(tx *store.Tx) error {
		var err error
		out, err = tx.ClaimSlots(ctx, claims)
		return err
	}))
	return out
}

func (f overlapFixture) slot(job string, i int) store.Claim {
	return store.Claim{Job: job, ScheduledAt: f.base.Add(time.Duration(i) * time.Second), Trigger: store.TriggerCatchUp, InstanceID: "a"}
}

// Overlap allow with max_concurrent 3: the slots claim up to three runs, in a batch as alone,
// and the fourth is skipped (overlap); a manual trigger, a re-run and a recovery queue a run
// while one is free, and otherwise answer with the newest active run or queue nothing.
func TestAllowClaimsUpToMaxConcurrent(t *testing.T) {
	t.Parallel()
	f := newOverlapFixture(t)
	ctx := context.Background()
	defineOverlap(t, f.db, "fan", "", 3)

	out := f.claims(t, f.slot("fan", 1), f.slot("fan", 2))
	require.NotNil(t, out[0].Run)
	require.NotNil(t, out[1].Run, "the batch's second slot of the job runs too")
	run, created, err := f.db.QueueManualRun(ctx, "fan", nil, []byte(`{}`))
	require.NoError(t, err)
	require.True(t, created, "the third run")
	out = f.claims(t, f.slot("fan", 3), f.slot("plan-change", 3))
	assert.Equal(t, store.ReasonOverlap, out[0].Skipped, "a fourth slot is skipped")
	require.NotNil(t, out[1].Run, "another job is not held back")
	again, created, err := f.db.QueueManualRun(ctx, "fan", nil, []byte(`{}`))
	require.NoError(t, err)
	assert.False(t, created)
	assert.Equal(t, run.ID, again.ID, "the newest active run answers")
	_, created, err = f.db.QueueSlotRun(ctx, "fan", f.base.Add(time.Second), store.TriggerRerun, nil, nil)
	require.NoError(t, err)
	assert.False(t, created, "a re-run waits for room as a trigger does")
	assert.Equal(t, 3, activeRuns(t, f.db, "fan"))

	// Two of the runs are left by a dead leader: each is recovered, up to the bound.
	_, err = f.db.Pool.Exec(ctx, `UPDATE job_runs SET epoch = 0 WHERE job = 'fan' AND status = 'running'`)
	require.NoError(t, err)
	var abandoned []store.Abandoned
	require.NoError(t, f.db.Fenced(ctx, store.Fence{Epoch: 1}, func(tx *store.Tx) error {
		abandoned, err = tx.AbandonRuns(ctx, nil, nil)
		return err
	}))
	require.Len(t, abandoned, 2)
	for _, a := range abandoned {
		assert.NotZero(t, a.RecoveryID, "room for each recovery: the queued manual run and two recoveries make three")
	}
	assert.Equal(t, 3, activeRuns(t, f.db, "fan"))
}

// Overlap replace: the claim ends at once the runs nobody runs (a queued run, a callback run
// its target accepted, whose late completion then conflicts) and runs the slot; a run a
// goroutine runs gets its cancel requested and the claim is Busy until it ended. A slot
// that is not the waiting one is skipped. Never two active runs.
func TestReplaceCancelsTheActiveRun(t *testing.T) {
	t.Parallel()
	f := newOverlapFixture(t)
	ctx := context.Background()
	defineOverlap(t, f.db, "swap", "replace", 0)
	replace := func(i int) store.Claim { c := f.slot("swap", i); c.Replace = true; return c }

	queued, created, err := f.db.QueueManualRun(ctx, "swap", nil, []byte(`{}`))
	require.NoError(t, err)
	require.True(t, created)
	out := f.claims(t, replace(1))
	require.NotNil(t, out[0].Run, "the queued run is replaced at once")
	require.Len(t, out[0].Replaced, 1)
	assert.Equal(t, queued.ID, out[0].Replaced[0].ID)
	got, err := f.db.Run(ctx, queued.ID)
	require.NoError(t, err)
	assert.Equal(t, store.StatusCancelled, got.Status)
	assert.Contains(t, *got.Error, "replaced by the slot")

	// The slot's run is running (a goroutine's): the next replace slot asks for its cancel.
	running := out[0].Run
	out = f.claims(t, replace(2))
	assert.True(t, out[0].Busy)
	assert.Equal(t, []int64{running.ID}, out[0].Cancelling)
	ids, err := f.db.CancelRequested(ctx, 0, 1)
	require.NoError(t, err)
	assert.Equal(t, []int64{running.ID}, ids, "the leader's cancel path sees it")
	out = f.claims(t, f.slot("swap", 3))
	assert.Equal(t, store.ReasonOverlap, out[0].Skipped, "a slot that does not wait is skipped")
	assert.Equal(t, 1, activeRuns(t, f.db, "swap"))

	// The run ends cancelled, as its goroutine records it; then a callback run the target
	// accepted is replaced at once, and its late completion conflicts.
	require.NoError(t, f.db.Fenced(ctx, store.Fence{Epoch: 1}, func(tx *store.Tx) error {
		return tx.FinishRun(ctx, running.ID, store.StatusCancelled, []byte(`{}`), nil, nil)
	}))
	out = f.claims(t, replace(2))
	require.NotNil(t, out[0].Run)
	cb := out[0].Run
	token := store.CallbackTokenHash("tok")
	require.NoError(t, f.db.Fenced(ctx, store.Fence{Epoch: 1}, func(tx *store.Tx) error {
		if err := tx.ArmCallback(ctx, cb.ID, token); err != nil {
			return err
		}
		_, err := tx.AcceptCallback(ctx, store.Accept{RunID: cb.ID, Stats: []byte(`{}`), HeartbeatTimeout: time.Minute, Deadline: time.Now().Add(time.Hour)})
		return err
	}))
	out = f.claims(t, replace(4))
	require.NotNil(t, out[0].Run, "an accepted callback run is replaced at once")
	require.Len(t, out[0].Replaced, 1)
	assert.Equal(t, cb.ID, out[0].Replaced[0].ID)
	res, _, err := f.db.CompleteCallback(ctx, store.Completion{RunID: cb.ID, TokenHash: token, Status: store.StatusSucceeded},
		func(store.Executor, store.Ended) error { return nil })
	require.NoError(t, err)
	assert.Equal(t, store.CallbackConflict, res, "its late completion is refused (409)")
	assert.Equal(t, 1, activeRuns(t, f.db, "swap"))

	// A manual trigger does not replace: it answers with the active run.
	again, created, err := f.db.QueueManualRun(ctx, "swap", nil, []byte(`{}`))
	require.NoError(t, err)
	assert.False(t, created)
	assert.Equal(t, out[0].Run.ID, again.ID)
}
