package store_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schedulerhq/scheduler/internal/store"
	"github.com/schedulerhq/scheduler/internal/store/storetest"
	"github.com/schedulerhq/scheduler/internal/testdb"
)

// childRow is what a test reads of a child's slot row.
type childRow struct {
	ID        int64
	Trigger   string
	Status    string
	Reason    *string
	Parents   []int64
	Partition int
}

// childRows is job's rows of slot at, by id.
func childRows(t *testing.T, db *testdb.DB, job string, at time.Time) []childRow {
	t.Helper()
	rows, err := db.Pool.Query(context.Background(), `SELECT id, trigger, status, reason, coalesce(parent_run_ids, '{}'), partition_id
		FROM job_runs WHERE job = $1 AND scheduled_at = $2 ORDER BY id`, job, at)
	require.NoError(t, err)
	defer rows.Close()
	var out []childRow
	for rows.Next() {
		var r childRow
		require.NoError(t, rows.Scan(&r.ID, &r.Trigger, &r.Status, &r.Reason, &r.Parents, &r.Partition))
		out = append(out, r)
	}
	require.NoError(t, rows.Err())
	return out
}

// openChain opens a leader's database with the definitions given (name → definition JSON).
func openChain(t *testing.T, defs map[string]string) (*testdb.DB, time.Time) {
	t.Helper()
	db, now := openAsLeader(t)
	testdb.AddRunDays(t, db.Pool, now.Add(-48*time.Hour), now)
	for name, def := range defs {
		storetest.Definition(context.Background(), t, db.Pool, storetest.DefinitionOpts{Name: name, Definition: []byte(def)})
	}
	return db, now
}

// running inserts a running run of job's slot at (a re-run when rerun > 0).
func running(t *testing.T, db *testdb.DB, job string, at time.Time, rerun int) *store.Run {
	t.Helper()
	o := storetest.RunOpts{Job: job, Status: store.StatusRunning, ScheduledAt: at, StartedAt: at, Epoch: storetest.Ptr(int64(1)), Rerun: rerun}
	if rerun > 0 {
		o.Trigger = store.TriggerRerun
	}
	return storetest.Run(context.Background(), t, db.Pool, o)
}

// end ends a run as the leader's finisher does.
func end(t *testing.T, db *testdb.DB, id int64, status string) {
	t.Helper()
	require.NoError(t, db.Fenced(context.Background(), store.Fence{Epoch: 1}, func(tx *store.Tx) error {
		return tx.FinishRun(context.Background(), id, status, nil, nil, nil)
	}))
}

// A parent's successful run of a slot queues one run of its child for that slot, in the
// transaction that ends it, linked to it and in the child's partition; a re-run of the slot
// that succeeds again adds none.
func TestAfterQueuesOneChildRunPerParentSlot(t *testing.T) {
	t.Parallel()
	db, now := openChain(t, map[string]string{"extract": `{}`, "transform": `{"after": ["extract"]}`})
	ctx := context.Background()
	_, err := db.Pool.Exec(ctx, `UPDATE job_definitions SET partition_id = 3 WHERE name = 'transform'`)
	require.NoError(t, err)
	slot := now.Add(-time.Minute)

	first := running(t, db, "extract", slot, 0)
	end(t, db, first.ID, store.StatusSucceeded)
	rows := childRows(t, db, "transform", slot)
	require.Len(t, rows, 1)
	assert.Equal(t, childRow{ID: rows[0].ID, Trigger: store.TriggerAfter, Status: store.StatusQueued, Parents: []int64{first.ID}, Partition: 3}, rows[0])

	// The child's run ends, then the parent's slot is re-run and succeeds again.
	_, err = db.Pool.Exec(ctx, `UPDATE job_runs SET status = 'succeeded', finished_at = now() WHERE id = $1`, rows[0].ID)
	require.NoError(t, err)
	again := running(t, db, "extract", slot, 1)
	end(t, db, again.ID, store.StatusSucceeded)
	assert.Len(t, childRows(t, db, "transform", slot), 1, "a re-run parent never runs the child twice")

	// A manual run of the parent has no slot: no child run.
	manual := storetest.Run(ctx, t, db.Pool, storetest.RunOpts{Job: "extract", Status: store.StatusRunning, Epoch: storetest.Ptr(int64(1))})
	end(t, db, manual.ID, store.StatusSucceeded)
	var n int
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT count(*) FROM job_runs WHERE job = 'transform'`).Scan(&n))
	assert.Equal(t, 1, n)
}

// A failed parent records the child's slot skipped (parent failed), linked to the failed
// run; a re-run of that parent slot that succeeds turns the same row into the child's run.
func TestAfterFailedParentSkipsUntilReRunSucceeds(t *testing.T) {
	t.Parallel()
	db, now := openChain(t, map[string]string{"extract": `{}`, "transform": `{"after": ["extract"]}`, "load": `{"after": ["transform"]}`})
	slot := now.Add(-time.Minute)

	failed := running(t, db, "extract", slot, 0)
	end(t, db, failed.ID, store.StatusTimedOut)
	rows := childRows(t, db, "transform", slot)
	require.Len(t, rows, 1)
	assert.Equal(t, store.StatusSkipped, rows[0].Status)
	assert.Equal(t, store.ReasonParentFailed, *rows[0].Reason)
	assert.Equal(t, []int64{failed.ID}, rows[0].Parents)
	assert.Empty(t, childRows(t, db, "load", slot), "the grandchild waits: its parent did not fail, it did not run")

	rerun := running(t, db, "extract", slot, 1)
	end(t, db, rerun.ID, store.StatusSucceeded)
	after := childRows(t, db, "transform", slot)
	require.Len(t, after, 1, "the slot still has exactly one row")
	assert.Equal(t, rows[0].ID, after[0].ID)
	assert.Equal(t, store.StatusQueued, after[0].Status)
	assert.Nil(t, after[0].Reason)
	assert.Equal(t, []int64{rerun.ID}, after[0].Parents)

	// The child's run is the grandchild's parent: its success queues load for the same slot.
	_, err := db.Pool.Exec(context.Background(), `UPDATE job_runs SET status = 'running', started_at = now(), epoch = 1 WHERE id = $1`, after[0].ID)
	require.NoError(t, err)
	end(t, db, after[0].ID, store.StatusSucceeded)
	load := childRows(t, db, "load", slot)
	require.Len(t, load, 1)
	assert.Equal(t, []int64{after[0].ID}, load[0].Parents)
}

// A recovery run does its abandoned run's slot: its success runs the child for that slot.
func TestAfterRecoveryRunCountsForItsSlot(t *testing.T) {
	t.Parallel()
	db, now := openChain(t, map[string]string{"extract": `{}`, "transform": `{"after": ["extract"]}`})
	ctx := context.Background()
	slot := now.Add(-time.Minute)
	lost := storetest.Run(ctx, t, db.Pool, storetest.RunOpts{Job: "extract", Status: store.StatusAbandoned, ScheduledAt: slot, FinishedAt: now})
	recovery := storetest.Run(ctx, t, db.Pool, storetest.RunOpts{Job: "extract", Trigger: store.TriggerRecovery, Status: store.StatusRunning,
		RecoversRunID: lost.ID, Epoch: storetest.Ptr(int64(1))})
	end(t, db, recovery.ID, store.StatusSucceeded)
	rows := childRows(t, db, "transform", slot)
	require.Len(t, rows, 1)
	assert.Equal(t, []int64{recovery.ID}, rows[0].Parents)
}

// Two parents that end at once, in two transactions, still run their child: the second
// to decide sees the first one's success. Each round is a new slot.
func TestAfterConcurrentParentsRunTheChildOnce(t *testing.T) {
	t.Parallel()
	db, now := openChain(t, map[string]string{"a": `{}`, "b": `{}`, "c": `{"after": ["a", "b"]}`})
	ctx := context.Background()
	for round := range 20 {
		slot := now.Add(-time.Duration(round+1) * time.Minute)
		ra, rb := running(t, db, "a", slot, 0), running(t, db, "b", slot, 0)
		// Both end statements run before either commits: the race the lock closes.
		start := make(chan struct{})
		var wg sync.WaitGroup
		for _, id := range []int64{ra.ID, rb.ID} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				assert.NoError(t, db.Fenced(ctx, store.Fence{Epoch: 1}, func(tx *store.Tx) error {
					return tx.FinishRun(ctx, id, store.StatusSucceeded, nil, nil, nil)
				}))
			}()
		}
		close(start)
		wg.Wait()
		rows := childRows(t, db, "c", slot)
		require.Len(t, rows, 1, "round %d", round)
		assert.ElementsMatch(t, []int64{ra.ID, rb.ID}, rows[0].Parents)
		// c's run ends so that the next round's is not held by its bound.
		_, err := db.Pool.Exec(ctx, `UPDATE job_runs SET status = 'succeeded', finished_at = now() WHERE id = $1`, rows[0].ID)
		require.NoError(t, err)
	}
}

// Concurrent re-runs of one parent slot (a parent allowed five runs at once) create one
// child run.
func TestAfterConcurrentReRunsCreateOneChildRun(t *testing.T) {
	t.Parallel()
	db, now := openChain(t, map[string]string{"extract": `{"overlap": "allow", "max_concurrent": 5}`, "transform": `{"after": ["extract"]}`})
	ctx := context.Background()
	slot := now.Add(-time.Minute)
	var ids []int64
	for i := range 5 {
		ids = append(ids, running(t, db, "extract", slot, i).ID)
	}
	start := make(chan struct{})
	var wg sync.WaitGroup
	for _, id := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			assert.NoError(t, db.Fenced(ctx, store.Fence{Epoch: 1}, func(tx *store.Tx) error {
				return tx.FinishRun(ctx, id, store.StatusSucceeded, nil, nil, nil)
			}))
		}()
	}
	close(start)
	wg.Wait()
	assert.Len(t, childRows(t, db, "transform", slot), 1)
}

// A child that still runs when its next slot's parents succeed keeps the slot waiting, and
// the end of its run queues it, once; a cancelled queued child run does the same.
func TestAfterBusyChildWaitsForItsRunToEnd(t *testing.T) {
	t.Parallel()
	db, now := openChain(t, map[string]string{"extract": `{}`, "transform": `{"after": ["extract"]}`})
	ctx := context.Background()
	s1, s2, s3 := now.Add(-3*time.Minute), now.Add(-2*time.Minute), now.Add(-time.Minute)
	busy := running(t, db, "transform", s1.Add(-time.Hour), 0)

	p2 := running(t, db, "extract", s2, 0)
	end(t, db, p2.ID, store.StatusSucceeded)
	p3 := running(t, db, "extract", s3, 0)
	end(t, db, p3.ID, store.StatusSucceeded)
	assert.Empty(t, childRows(t, db, "transform", s2), "the child has its bound of active runs")
	var waiting int
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT count(*) FROM scheduler_after_waiting WHERE job = 'transform'`).Scan(&waiting))
	assert.Equal(t, 2, waiting)

	end(t, db, busy.ID, store.StatusSucceeded)
	rows := childRows(t, db, "transform", s2)
	require.Len(t, rows, 1, "the oldest waiting slot is queued by the end of the child's run")
	assert.Equal(t, store.StatusQueued, rows[0].Status)
	assert.Equal(t, []int64{p2.ID}, rows[0].Parents)
	assert.Empty(t, childRows(t, db, "transform", s3))

	_, outcome, err := db.CancelRun(ctx, rows[0].ID)
	require.NoError(t, err)
	require.Equal(t, store.CancelledQueued, outcome)
	rows = childRows(t, db, "transform", s3)
	require.Len(t, rows, 1, "cancelling the queued child run queues the next waiting slot")
	assert.Equal(t, []int64{p3.ID}, rows[0].Parents)
}

// With parents on different schedules, slot S of the first parent waits for each other
// parent's latest slot at or before S: an hourly parent's 10:00 run completes the first
// parent's slots from 10:00 up to its next slot, not before.
func TestAfterParentsOnDifferentSchedules(t *testing.T) {
	t.Parallel()
	db, now := openChain(t, map[string]string{"fast": `{}`, "hourly": `{}`, "report": `{"after": ["fast", "hourly"]}`})
	hour := now.Truncate(time.Hour).Add(-2 * time.Hour)
	var fast []*store.Run
	for i := range 4 { // fast at hour-15m, hour, hour+15m, hour+30m
		r := running(t, db, "fast", hour.Add(time.Duration(i-1)*15*time.Minute), 0)
		end(t, db, r.ID, store.StatusSucceeded)
		fast = append(fast, r)
	}
	for _, r := range fast {
		assert.Empty(t, childRows(t, db, "report", *r.ScheduledAt), "the hourly parent has not run")
	}
	h := running(t, db, "hourly", hour, 0)
	end(t, db, h.ID, store.StatusSucceeded)
	assert.Empty(t, childRows(t, db, "report", *fast[0].ScheduledAt), "hour-15m has no hourly slot at or before it")
	rows := childRows(t, db, "report", *fast[1].ScheduledAt)
	require.Len(t, rows, 1)
	assert.Equal(t, []int64{fast[1].ID, h.ID}, rows[0].Parents)
	// The child runs one run at a time: the next two slots wait for it, with their parents.
	w, err := db.Pool.Query(context.Background(), `SELECT scheduled_at, parent_run_ids FROM scheduler_after_waiting WHERE job = 'report' ORDER BY 1`)
	require.NoError(t, err)
	type slotParents struct {
		At      time.Time
		Parents []int64
	}
	waiting, err := pgx.CollectRows(w, pgx.RowToStructByPos[slotParents])
	require.NoError(t, err)
	require.Len(t, waiting, 2)
	for i, x := range waiting {
		assert.True(t, fast[i+2].ScheduledAt.Equal(x.At))
		assert.Equal(t, []int64{fast[i+2].ID, h.ID}, x.Parents)
	}
}

// A deleted child's waiting slots go with it: no run of it would ever queue them.
func TestAfterDeletedChildLeavesNoWaitingSlot(t *testing.T) {
	t.Parallel()
	db, now := openChain(t, map[string]string{"extract": `{}`, "transform": `{"after": ["extract"]}`})
	ctx := context.Background()
	running(t, db, "transform", now.Add(-time.Hour), 0)
	p := running(t, db, "extract", now.Add(-time.Minute), 0)
	end(t, db, p.ID, store.StatusSucceeded)
	var n int
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT count(*) FROM scheduler_after_waiting`).Scan(&n))
	require.Equal(t, 1, n)
	_, err := db.DeleteDefinition(ctx, "transform", 0)
	require.NoError(t, err)
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT count(*) FROM scheduler_after_waiting`).Scan(&n))
	assert.Zero(t, n)
}

// A paused child records the slots its parents complete skipped (paused), as a paused job's
// own slots; once resumed, a successful re-run of that parent slot runs it.
func TestAfterPausedChildSkipsItsSlots(t *testing.T) {
	t.Parallel()
	db, now := openChain(t, map[string]string{"extract": `{}`, "transform": `{"after": ["extract"]}`})
	ctx := context.Background()
	require.NoError(t, db.SetPaused(ctx, "transform", true))
	slot := now.Add(-time.Minute)
	p := running(t, db, "extract", slot, 0)
	end(t, db, p.ID, store.StatusSucceeded)
	rows := childRows(t, db, "transform", slot)
	require.Len(t, rows, 1)
	assert.Equal(t, store.StatusSkipped, rows[0].Status)
	assert.Equal(t, store.ReasonPaused, *rows[0].Reason)
	assert.Equal(t, []int64{p.ID}, rows[0].Parents)

	require.NoError(t, db.SetPaused(ctx, "transform", false))
	again := running(t, db, "extract", slot, 1)
	end(t, db, again.ID, store.StatusSucceeded)
	rows = childRows(t, db, "transform", slot)
	require.Len(t, rows, 1)
	assert.Equal(t, store.StatusQueued, rows[0].Status)
}

// Every end statement reads which jobs have children; it reads them from the index of
// parents, whose entries are the chained definitions only, not by scanning every definition
// (12 000 definitions: 1.6 ms a statement, against 0.07 ms).
func TestEndsReadTheChainedDefinitionsByIndex(t *testing.T) {
	t.Parallel()
	db, now := openChain(t, map[string]string{"extract": `{}`, "transform": `{"after": ["extract"]}`})
	ctx := context.Background()
	_, err := db.Pool.Exec(ctx, `INSERT INTO job_definitions (name, kind, definition)
		SELECT 'job-' || g, 'http', '{}' FROM generate_series(1, 5000) g`)
	require.NoError(t, err)
	_, err = db.Pool.Exec(ctx, `VACUUM ANALYZE job_definitions`)
	require.NoError(t, err)
	r := running(t, db, "extract", now.Add(-time.Minute), 0)
	var plan []string
	err = pgx.BeginFunc(ctx, db.Pool, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, `EXPLAIN (COSTS OFF) `+store.EndRunsSQL, []int64{r.ID}, []string{"running"}, []string{"succeeded"},
			[]json.RawMessage{nil}, []*string{nil}, []*int64{nil}, []int64{0}, []*string{nil}, []bool{false}, nil)
		if err != nil {
			return err
		}
		plan, err = pgx.CollectRows(rows, pgx.RowTo[string])
		return err
	})
	require.NoError(t, err)
	text := strings.Join(plan, "\n")
	assert.Contains(t, text, "job_definitions_after_keys_idx", text)
	assert.NotContains(t, text, "Seq Scan on job_definitions", text)
}
