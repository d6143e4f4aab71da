package jobs_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schedulerhq/scheduler/internal/jobcontract"
	"github.com/schedulerhq/scheduler/internal/jobs"
	"github.com/schedulerhq/scheduler/internal/store"
	"github.com/schedulerhq/scheduler/internal/testdb"
)

// The walker's tests walk a table of their own: items due (state 'due') become 'done'.

type item struct {
	ID    int64
	Group int64
}

const (
	dueItemsSQL = `
SELECT id, grp FROM walk_items
WHERE state = 'due' AND id > @after_id
ORDER BY id
LIMIT @limit`
	finishItemsSQL = `
UPDATE walk_items SET state = 'done', batch = @batch
WHERE id = ANY(@ids) AND state = 'due'`
)

// openPool is a pool on the test's database of its own (the store's is the store's).
func openPool(t *testing.T, url string) *pgxpool.Pool {
	t.Helper()
	pool, err := pgxpool.New(context.Background(), url)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	return pool
}

// seedItems creates walk_items with n due items, ids 1..n, in groups of 3 (grp = (id+2)/3).
func seedItems(t *testing.T, pool *pgxpool.Pool, n int) {
	t.Helper()
	ctx := context.Background()
	_, err := pool.Exec(ctx, `CREATE TABLE walk_items (id bigint PRIMARY KEY, grp bigint NOT NULL, state text NOT NULL, batch int)`)
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `INSERT INTO walk_items SELECT i, (i + 2) / 3, 'due' FROM generate_series(1, $1::int) AS i`, n)
	require.NoError(t, err)
}

// itemWalk finishes due items in batches of size, locking each item's group, and records in
// batches the number of Apply calls.
func itemWalk(size int, batches *atomic.Int64) *jobcontract.Walk[item] {
	return &jobcontract.Walk[item]{
		Job:       "walk-test",
		BatchSize: size,
		Read:      dueItemsSQL,
		Start:     pgx.NamedArgs{"after_id": int64(0)},
		Keyset:    func(it item) pgx.NamedArgs { return pgx.NamedArgs{"after_id": it.ID} },
		Lock:      func(it item) int64 { return it.Group },
		Apply: func(ctx context.Context, b *jobcontract.Batch[item]) error {
			batches.Add(1)
			tag, err := b.Tx.Exec(ctx, finishItemsSQL, pgx.NamedArgs{
				"ids": jobcontract.Column(b.Rows, func(it item) int64 { return it.ID }), "batch": b.N,
			})
			b.Stats.Changed += tag.RowsAffected()
			return err
		},
	}
}

func itemStates(t *testing.T, pool *pgxpool.Pool) map[string]int {
	t.Helper()
	rows, err := pool.Query(context.Background(), `SELECT state, count(*) FROM walk_items GROUP BY state`)
	require.NoError(t, err)
	out := map[string]int{}
	var s string
	var n int
	_, err = pgx.ForEachRow(rows, []any{&s, &n}, func() error { out[s] = n; return nil })
	require.NoError(t, err)
	return out
}

func TestWalkContinuesTheKeysetAcrossBatches(t *testing.T) {
	t.Parallel()
	db, url := testdb.Open(t, store.Options{})
	pool := openPool(t, url)
	seedItems(t, pool, 25)
	var batches atomic.Int64
	st, err := itemWalk(10, &batches).Run(context.Background(), newEnv(t, db, "walk-test"))
	require.NoError(t, err)
	assert.EqualValues(t, 25, st.Processed)
	assert.EqualValues(t, 25, st.Changed)
	assert.Zero(t, st.SkippedLocked)
	assert.EqualValues(t, 3, batches.Load(), "10 + 10 + 5: the short batch ends the walk")
	assert.Equal(t, map[string]int{"done": 25}, itemStates(t, pool))
	var perBatch []int
	require.NoError(t, pool.QueryRow(context.Background(),
		`SELECT array_agg(n ORDER BY batch) FROM (SELECT batch, count(*) AS n FROM walk_items GROUP BY batch) b`).Scan(&perBatch))
	assert.Equal(t, []int{10, 10, 5}, perBatch, "each batch starts after the last one's keyset position")
}

func TestWalkSkipsAndCountsEntitiesLockedElsewhere(t *testing.T) {
	t.Parallel()
	db, url := testdb.Open(t, store.Options{})
	pool := openPool(t, url)
	seedItems(t, pool, 12)
	holdLock(t, db, "walk-test", 2) // items 4, 5, 6
	var batches atomic.Int64
	st, err := itemWalk(5, &batches).Run(context.Background(), newEnv(t, db, "walk-test"))
	require.NoError(t, err)
	assert.EqualValues(t, 12, st.Processed)
	assert.EqualValues(t, 3, st.SkippedLocked, "the rows of the group held by another transaction")
	assert.EqualValues(t, 9, st.Changed)
	var left []int64
	require.NoError(t, pool.QueryRow(context.Background(),
		`SELECT array_agg(id ORDER BY id) FROM walk_items WHERE state = 'due'`).Scan(&left))
	assert.Equal(t, []int64{4, 5, 6}, left, "skipped, not waited for: the next run takes them")
}

func TestWalkAppliesTheGuardAfterTheLock(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, url := testdb.Open(t, store.Options{})
	pool := openPool(t, url)
	seedItems(t, pool, 6)
	w := itemWalk(10, new(atomic.Int64))
	// Between the batch's read and its statement, another writer finishes item 3: the
	// guarded statement, in a snapshot taken after the lock, must not count it again.
	w.Filter = func(it item, _ *jobcontract.Stats) bool {
		if it.ID == 3 {
			_, err := pool.Exec(ctx, `UPDATE walk_items SET state = 'done', batch = 0 WHERE id = 3`)
			require.NoError(t, err)
		}
		return true
	}
	st, err := w.Run(ctx, newEnv(t, db, "walk-test"))
	require.NoError(t, err)
	assert.EqualValues(t, 6, st.Processed)
	assert.EqualValues(t, 5, st.Changed, "the row changed elsewhere is refused by the guard")
	var batch int
	require.NoError(t, pool.QueryRow(ctx, `SELECT batch FROM walk_items WHERE id = 3`).Scan(&batch))
	assert.Zero(t, batch, "the other writer's change stands")
}

func TestWalkFilterLeavesRowsOut(t *testing.T) {
	t.Parallel()
	db, url := testdb.Open(t, store.Options{})
	pool := openPool(t, url)
	seedItems(t, pool, 9)
	w := itemWalk(4, new(atomic.Int64))
	w.Filter = func(it item, st *jobcontract.Stats) bool {
		if it.ID%3 == 0 {
			st.Count("odd_one", 1)
			return false
		}
		return true
	}
	st, err := w.Run(context.Background(), newEnv(t, db, "walk-test"))
	require.NoError(t, err)
	assert.EqualValues(t, 9, st.Processed)
	assert.EqualValues(t, 6, st.Changed)
	assert.EqualValues(t, 3, st.Detail["odd_one"])
	assert.Equal(t, map[string]int{"done": 6, "due": 3}, itemStates(t, pool))
}

func TestWalkDryRunCountsAndChangesNothing(t *testing.T) {
	t.Parallel()
	db, url := testdb.Open(t, store.Options{})
	pool := openPool(t, url)
	seedItems(t, pool, 25)
	env := newEnv(t, db, "walk-test")
	env.Params.DryRun = true
	var batches atomic.Int64
	st, err := itemWalk(10, &batches).Run(context.Background(), env)
	require.NoError(t, err)
	assert.EqualValues(t, 25, st.Changed, "what a real run would change")
	assert.EqualValues(t, 3, batches.Load(), "the keyset moves on although each batch is rolled back")
	assert.Equal(t, map[string]int{"due": 25}, itemStates(t, pool))
}

func TestWalkOfADeposedLeaderCommitsNothing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, url := testdb.Open(t, store.Options{})
	pool := openPool(t, url)
	seedItems(t, pool, 5)
	env := newEnv(t, db, "walk-test")
	_, err := pool.Exec(ctx, `UPDATE scheduler_leader SET epoch = 2`)
	require.NoError(t, err)
	_, err = itemWalk(10, new(atomic.Int64)).Run(ctx, env)
	require.ErrorIs(t, err, store.ErrNotLeader)
	assert.Equal(t, map[string]int{"due": 5}, itemStates(t, pool))
}

func TestWalkStopsWhenCancelled(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	db, url := testdb.Open(t, store.Options{})
	pool := openPool(t, url)
	seedItems(t, pool, 30)
	env := newEnv(t, db, "walk-test")
	tx := env.Tx
	env.Tx = func(ctx context.Context, fn func(pgx.Tx) error) error {
		err := tx(ctx, fn)
		cancel() // once the first batch has committed: no other batch starts
		return err
	}
	st, err := itemWalk(10, new(atomic.Int64)).Run(ctx, env)
	require.ErrorIs(t, err, context.Canceled)
	assert.EqualValues(t, 10, st.Processed)
	assert.Equal(t, map[string]int{"done": 10, "due": 20}, itemStates(t, pool))
}

// readHook is a walk's read-only Querier that calls after with each read's context and SQL,
// once the read has started.
type readHook struct {
	jobcontract.Querier
	after func(ctx context.Context, sql string)
}

func (q readHook) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	rows, err := q.Querier.Query(ctx, sql, args...)
	q.after(ctx, sql)
	return rows, err
}

func TestWalkReadsTheNextBatchWhileApplyingThisOne(t *testing.T) {
	t.Parallel()
	db, url := testdb.Open(t, store.Options{})
	pool := openPool(t, url)
	seedItems(t, pool, 25)
	env := newEnv(t, db, "walk-test")
	reads := make(chan struct{}, 10)
	env.ReadOnly = readHook{Querier: env.ReadOnly, after: func(context.Context, string) { reads <- struct{}{} }}
	w := itemWalk(10, new(atomic.Int64))
	apply := w.Apply
	w.Apply = func(ctx context.Context, b *jobcontract.Batch[item]) error {
		if b.N == 1 {
			// This batch's read, then the next one's, before this batch's statement ends.
			for range 2 {
				select {
				case <-reads:
				case <-time.After(10 * time.Second):
					return errors.New("the next batch was not read through the read-only pool while this one was applied")
				}
			}
		}
		return apply(ctx, b)
	}
	st, err := w.Run(context.Background(), env)
	require.NoError(t, err)
	assert.EqualValues(t, 25, st.Changed)
	assert.Equal(t, map[string]int{"done": 25}, itemStates(t, pool))
}

func TestWalkAppliesParallelBatchesAtOnce(t *testing.T) {
	t.Parallel()
	db, url := testdb.Open(t, store.Options{})
	pool := openPool(t, url)
	seedItems(t, pool, 45)
	w := itemWalk(10, new(atomic.Int64))
	w.Lock = func(it item) int64 { return it.ID } // one row per entity, as Parallel requires
	w.Parallel = 2
	// Batch 1's statement waits until batch 2's has started: applied one after the other,
	// they never would.
	second := make(chan struct{})
	apply := w.Apply
	w.Apply = func(ctx context.Context, b *jobcontract.Batch[item]) error {
		switch b.N {
		case 1:
			select {
			case <-second:
			case <-time.After(10 * time.Second):
				return errors.New("batch 2 was not applied while batch 1 was")
			}
		case 2:
			close(second)
		}
		return apply(ctx, b)
	}
	st, err := w.Run(context.Background(), newEnv(t, db, "walk-test"))
	require.NoError(t, err)
	assert.EqualValues(t, 45, st.Processed)
	assert.EqualValues(t, 45, st.Changed)
	assert.Equal(t, map[string]int{"done": 45}, itemStates(t, pool))
	var perBatch []int
	require.NoError(t, pool.QueryRow(context.Background(),
		`SELECT array_agg(n ORDER BY batch) FROM (SELECT batch, count(*) AS n FROM walk_items GROUP BY batch) b`).Scan(&perBatch))
	assert.Equal(t, []int{10, 10, 10, 10, 5}, perBatch, "each batch numbered in keyset order, read once")
}

// Batches applied at once race to their commits when one fails: whichever order they end in,
// the walk's counts are those of the batches that committed.
func TestWalkStopsEveryApplierAtTheFirstError(t *testing.T) {
	t.Parallel()
	db, url := testdb.Open(t, store.Options{})
	pool := openPool(t, url)
	seedItems(t, pool, 100)
	w := itemWalk(10, new(atomic.Int64))
	w.Lock = func(it item) int64 { return it.ID }
	w.Parallel = 2
	boom := errors.New("boom")
	apply := w.Apply
	w.Apply = func(ctx context.Context, b *jobcontract.Batch[item]) error {
		if b.N == 3 {
			return boom
		}
		return apply(ctx, b)
	}
	st, err := w.Run(context.Background(), newEnv(t, db, "walk-test"))
	require.ErrorIs(t, err, boom)
	states := itemStates(t, pool)
	assert.EqualValues(t, states["done"], st.Changed, "the counts are those of the batches that committed")
	var due []int64
	require.NoError(t, pool.QueryRow(context.Background(),
		`SELECT array_agg(id ORDER BY id) FROM walk_items WHERE state = 'due' AND id BETWEEN 21 AND 30`).Scan(&due))
	assert.Len(t, due, 10, "the failed batch changed nothing")
}

// A batch still in its transaction when a sibling fails commits, and the walk counts it and
// hands its messages on: the failure stops the walk from starting batches, never ends one
// already running (whose COMMIT, cancelled in flight, could reach the server while the walk
// took it for failed, its claims left PENDING for the claim timeout).
func TestWalkFinishesTheBatchBesideAFailedOne(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, url := testdb.Open(t, store.Options{})
	pool := openPool(t, url)
	seedItems(t, pool, 45)
	env := newEnv(t, db, "walk-test")
	// The walk's own context, as its reads see it: it ends when the walk stops.
	walkCtx := make(chan context.Context, 1)
	env.ReadOnly = readHook{Querier: env.ReadOnly, after: func(ctx context.Context, _ string) {
		select {
		case walkCtx <- ctx:
		default:
		}
	}}
	sender := &recordingSender{}
	pipe := pipeline(sender)
	out := pipe.Open(ctx, env, jobs.Hooks{})
	w := itemWalk(10, new(atomic.Int64))
	w.Lock = func(it item) int64 { return it.ID }
	w.Parallel = 2
	var applied atomic.Int64
	boom := errors.New("boom")
	second := make(chan struct{})
	apply := w.Apply
	w.Apply = func(ctx context.Context, b *jobcontract.Batch[item]) error {
		applied.Add(1)
		switch b.N {
		case 1: // fails once batch 2 is in its transaction
			select {
			case <-second:
			case <-time.After(10 * time.Second):
				return errors.New("batch 2 was not applied beside batch 1")
			}
			return boom
		case 2: // applies and claims, then commits only once the walk has stopped
			if err := apply(ctx, b); err != nil {
				return err
			}
			msgs, err := pipe.Claim(ctx, b.Tx, testDrafts(0, 1))
			if err != nil {
				return err
			}
			b.AfterCommit(len(msgs), func() { out.Send(msgs...) })
			close(second)
			select {
			case <-(<-walkCtx).Done():
				return nil
			case <-time.After(10 * time.Second):
				return errors.New("the walk did not stop at batch 1's error")
			}
		}
		return apply(ctx, b)
	}
	st, err := w.Run(ctx, env)
	require.ErrorIs(t, err, boom)
	sent, err := out.Close()
	require.NoError(t, err)
	assert.Equal(t, map[string]int{"done": 10, "due": 35}, itemStates(t, pool), "batch 2 committed")
	assert.EqualValues(t, 10, st.Changed, "and was counted")
	assert.EqualValues(t, 1, sent.Detail["sent"], "and its claim was handed to the outbox")
	assert.Len(t, sender.sent, 1)
	assert.Equal(t, map[string]int{"SENT": 1}, deliveries(t, pool))
	assert.EqualValues(t, 2, applied.Load(), "no batch started once the walk had stopped")
}
