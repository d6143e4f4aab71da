package jobcontract

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/schedulerhq/scheduler/internal/backoff"
)

// Walk is the one way a job goes through its entities (docs/design.md, "The jobs"): batch
// after batch, each in its own transaction fenced by the run's epoch (Env.Tx),
//
//  1. Read: a keyset read of at most BatchSize rows after the last batch's position. With
//     entity locks (Lock set) it runs outside the transaction, through the read-only pool,
//     one batch ahead: the next batch is read while this one is locked and applied (Apply
//     re-checks every row anyway), and Parallel batches may be applied at once. Without, it
//     runs in the batch's transaction, where its FOR UPDATE SKIP LOCKED keeps copies apart;
//  2. Filter (optional): rows the job leaves out for a reason it counts (bad time zone, ...);
//  3. Lock: per entity, pg_try_advisory_xact_lock(hashtextextended('<Job>:<id>', 0)); the
//     rows of an entity another transaction holds are skipped and counted as skipped_locked,
//     never waited for, so copies of a job split the work instead of queueing;
//  4. Apply: the job's guarded statement over the locked rows. It runs after the lock, in its
//     own statement, so its snapshot sees everything the previous holder of a lock committed;
//     its guard re-checks each row's state, and a unique constraint stays the last line of
//     defence;
//  5. commit (or, for a dry run, roll back: the batch runs exactly as a real one would, so its
//     counts are what a real run would change), then run what Apply queued for after the
//     commit (Batch.AfterCommit: a sending job hands the messages it claimed to its outbox).
//
// The walk stops after a batch shorter than BatchSize, at the first error, or when ctx ends.
// An error stops only the batches not started yet: a batch already in its transaction runs
// to its end, and is counted and delivered if it commits. At most Parallel + 1 batches are in
// memory at a time (those applied and the one read ahead). A new job is its Read and Apply
// SQL plus the few fields below:
//
//	st, err := (&Walk[dueRow]{
//	    Job: j.Name(), BatchSize: 1000,
//	    Read: dueSQL, Args: pgx.NamedArgs{"today": today},
//	    Start:  pgx.NamedArgs{"after_id": int64(0)},
//	    Keyset: func(r dueRow) pgx.NamedArgs { return pgx.NamedArgs{"after_id": r.ID} },
//	    Lock:   func(r dueRow) int64 { return r.ID },
//	    Apply: func(ctx context.Context, b *Batch[dueRow]) error {
//	        tag, err := b.Tx.Exec(ctx, applySQL, pgx.NamedArgs{"ids": Column(b.Rows, dueRow.id)})
//	        b.Stats.Changed += tag.RowsAffected()
//	        return err
//	    },
//	}).Run(ctx, env)
type Walk[R any] struct {
	// Job prefixes the lock keys: '<Job>:<id>'. Usually the job's name; a job that walks two
	// kinds of entity gives the second its own prefix ("abandon-recovery:delivery").
	Job string
	// BatchSize bounds the rows one batch reads, locks and changes. Each locked entity holds
	// a slot of PostgreSQL's shared lock table until the batch commits (64 ×
	// max_connections slots by default, shared with every other transaction).
	BatchSize int
	// Read selects the next batch in keyset order: the rows after the position given by
	// Start (first batch) or Keyset (later ones), at most @limit of them, ORDER BY the keyset.
	// Its named arguments are Args, the keyset's and "limit".
	Read string
	// Args are Read's own named arguments (e.g. "now", "today").
	Args pgx.NamedArgs
	// Start is the keyset position of the first batch (e.g. {"after_id": int64(0)}).
	Start pgx.NamedArgs
	// Keyset is the position after last, the last row of a batch.
	Keyset func(last R) pgx.NamedArgs
	// Scan reads one row of Read; nil scans the columns into R's fields by position.
	Scan func(row pgx.CollectableRow) (R, error)
	// Filter, if set, keeps a row (true) or leaves it out of the lock and Apply (false),
	// counting why in st itself.
	Filter func(r R, st *Stats) bool
	// Lock returns the entity a row belongs to (several rows may share one, e.g. the rounds
	// of a group). nil takes no advisory lock: Read itself must keep copies apart (FOR UPDATE
	// SKIP LOCKED), and runs in the batch's transaction.
	Lock func(r R) int64
	// Apply is the guarded statement over the batch's locked rows (never called with none).
	// It adds what it changed to b.Stats (Changed, Errors, Detail) and, for a sending job,
	// queues the sending of the messages it claimed with b.AfterCommit.
	Apply func(ctx context.Context, b *Batch[R]) error
	// Pause, if set, separates two batches: room for the application's writers and for
	// autovacuum (data-retention).
	Pause time.Duration
	// Parallel is how many batches are applied at once, each in its own transaction (0 or
	// 1: one after the other). Only with Lock, and only when each entity is one row: an
	// entity whose rows straddle two batches applied at once is locked by one of them and
	// skipped by the other. Each batch holds its locks, so Parallel × BatchSize bounds the
	// lock-table slots the walk takes.
	Parallel int
}

// Batch is one batch's transaction and rows, as Apply sees them.
type Batch[R any] struct {
	// Tx is the batch's fenced transaction.
	Tx pgx.Tx
	// Rows are the rows whose entity lock this transaction holds, in keyset order.
	Rows []R
	// Stats are this batch's counts; the walk has counted Processed and SkippedLocked. They
	// join the run's counts once the batch commits (or rolls back as a dry run).
	Stats *Stats
	// N numbers the batches of the walk from 1, for log lines.
	N int

	afterCommit []func()
	delivers    int // what afterCommit hands on, counted as Changed by a dry run
}

// AfterCommit queues deliver, which hands on n things Apply claimed in Tx (a sending job's
// messages, to its outbox): the walk runs it once Tx has committed, never before, for a
// claim rolled back must not leave. A dry run counts n as Changed, what a real run would
// deliver, and runs nothing.
func (b *Batch[R]) AfterCommit(n int, deliver func()) {
	b.afterCommit = append(b.afterCommit, deliver)
	b.delivers += n
}

// CountStale counts, as Detail "stale", the locked rows that Apply's guard left alone, done
// of them having gone through: rows changed by another writer or run since the batch was read.
func (b *Batch[R]) CountStale(done int64) {
	if stale := int64(len(b.Rows)) - done; stale > 0 {
		b.Stats.Count("stale", stale)
	}
}

// Column maps rows to one column, for an array argument of Apply's statement
// (unnest(@ids::bigint[], ...)).
func Column[R, T any](rows []R, f func(R) T) []T {
	out := make([]T, len(rows))
	for i, r := range rows {
		out[i] = f(r)
	}
	return out
}

// ErrDryRun rolls back a dry run's transaction: returned from the function given to Env.Tx,
// it undoes what the transaction did once it has been counted; the caller ignores it.
var ErrDryRun = errors.New("dry run: roll back")

// Run walks the entities and returns the counts of the batches that committed (or, for a
// dry run, would have). On error it returns the counts so far with the error.
func (w *Walk[R]) Run(ctx context.Context, env *Env) (Stats, error) {
	if w.BatchSize <= 0 || w.Apply == nil || w.Keyset == nil {
		return Stats{}, fmt.Errorf("walk %s: BatchSize, Keyset and Apply are required", w.Job)
	}
	if w.Parallel > 1 && w.Lock == nil {
		return Stats{}, fmt.Errorf("walk %s: Parallel needs Lock", w.Job)
	}
	args := pgx.NamedArgs{"limit": w.BatchSize}
	for k, v := range w.Args {
		args[k] = v
	}
	for k, v := range w.Start {
		args[k] = v
	}
	if w.Lock == nil {
		return w.runReadingInTransactions(ctx, env, args)
	}
	return w.runReadingAhead(ctx, env, args)
}

// runReadingInTransactions reads each batch in its own transaction, where Read's FOR UPDATE
// SKIP LOCKED keeps copies apart, one batch after the other.
func (w *Walk[R]) runReadingInTransactions(ctx context.Context, env *Env, args pgx.NamedArgs) (Stats, error) {
	var st Stats
	for n := 1; ; n++ {
		if err := ctx.Err(); err != nil {
			return st, err
		}
		var all []R
		b, err := w.batch(ctx, env, n, func(tx pgx.Tx) ([]R, error) {
			var err error
			all, err = w.read(ctx, tx, args)
			return all, err
		})
		if err != nil {
			return st, err
		}
		st.Add(*b.Stats)
		w.deliver(env, b)
		if len(all) < w.BatchSize {
			return st, nil
		}
		for k, v := range w.Keyset(all[len(all)-1]) {
			args[k] = v
		}
		if !pause(ctx, w.Pause) {
			return st, ctx.Err()
		}
	}
}

// runReadingAhead reads the batches ahead through the read-only pool (Read takes no lock of
// its own, and Apply re-checks every row under the entity locks) and applies up to Parallel
// of them at once: the next batch is read while this one is locked and applied.
//
// The first error stops the walk (walkCtx): the read-ahead, the pauses, and any batch not
// started yet. A batch already in its transaction runs to its end under the run's ctx, and
// is counted and delivered (Batch.AfterCommit) if it commits: cancelled in flight, its
// COMMIT could reach the server while pgx reports context.Canceled, and the walk would drop
// the counts and the claimed messages of a batch that did commit.
func (w *Walk[R]) runReadingAhead(ctx context.Context, env *Env, args pgx.NamedArgs) (Stats, error) {
	walkCtx, stop := context.WithCancelCause(ctx)
	defer stop(nil)
	batches := w.readAhead(walkCtx, env.ReadOnly, args)
	var mu sync.Mutex
	var st Stats
	var appliers sync.WaitGroup
	for range max(1, w.Parallel) {
		appliers.Go(func() {
			for r := range batches {
				if walkCtx.Err() != nil {
					return // stopped: no batch starts
				}
				err := w.applyAhead(ctx, env, r, func(b *Batch[R]) {
					mu.Lock()
					st.Add(*b.Stats)
					mu.Unlock()
				})
				if err == nil {
					if !pause(walkCtx, w.Pause) {
						err = walkCtx.Err()
					}
				}
				if err != nil {
					stop(err)
					return
				}
			}
		})
	}
	appliers.Wait()
	return st, context.Cause(walkCtx)
}

// applyAhead runs the transaction of r, a batch read ahead, under ctx; once it has
// committed, count adds its counts and what it queued for after the commit runs.
func (w *Walk[R]) applyAhead(ctx context.Context, env *Env, r readResult[R], count func(*Batch[R])) error {
	if r.err != nil {
		return fmt.Errorf("%s batch %d: %w", w.Job, r.n, r.err)
	}
	b, err := w.batch(ctx, env, r.n, func(pgx.Tx) ([]R, error) { return r.rows, nil })
	if err != nil {
		return err
	}
	count(b)
	w.deliver(env, b)
	return nil
}

// batch runs batch n's transaction: the rows read gives, Filter, Lock, Apply, then commit
// (or, for a dry run, roll back, counting what it would deliver as Changed).
func (w *Walk[R]) batch(ctx context.Context, env *Env, n int, read func(tx pgx.Tx) ([]R, error)) (*Batch[R], error) {
	b := &Batch[R]{Stats: &Stats{}, N: n}
	err := env.Tx(ctx, func(tx pgx.Tx) error {
		*b = Batch[R]{Tx: tx, Stats: &Stats{}, N: n}
		// A panic in the job's code is recovered here, inside the transaction, which it
		// rolls back: on an applier's goroutine it would end the process.
		if err := CatchPanic(func() error { return w.apply(ctx, tx, b, read) }); err != nil {
			return err
		}
		if env.Params.DryRun {
			return ErrDryRun
		}
		return nil
	})
	if err != nil && !errors.Is(err, ErrDryRun) {
		return nil, fmt.Errorf("%s batch %d: %w", w.Job, n, err)
	}
	if env.Params.DryRun {
		b.Stats.Changed += int64(b.delivers) // what a real run would send
	}
	env.Log.Debug("batch done", "walk", w.Job, "batch", n, "read", b.Stats.Processed, "changed", b.Stats.Changed,
		"skipped_locked", b.Stats.SkippedLocked, "messages", b.delivers, "dry_run", env.Params.DryRun)
	return b, nil
}

// apply reads b's rows in tx, filters and locks them, and runs Apply over those locked.
func (w *Walk[R]) apply(ctx context.Context, tx pgx.Tx, b *Batch[R], read func(tx pgx.Tx) ([]R, error)) error {
	all, err := read(tx)
	if err != nil || len(all) == 0 {
		return err
	}
	b.Stats.Processed = int64(len(all))
	kept := make([]R, 0, len(all))
	for _, r := range all {
		if w.Filter == nil || w.Filter(r, b.Stats) {
			kept = append(kept, r)
		}
	}
	if b.Rows, err = w.lock(ctx, tx, kept); err != nil {
		return err
	}
	b.Stats.SkippedLocked = int64(len(kept) - len(b.Rows))
	if len(b.Rows) == 0 {
		return nil
	}
	return w.Apply(ctx, b)
}

// deliver runs what Apply queued for after b's commit; a dry run runs none.
func (w *Walk[R]) deliver(env *Env, b *Batch[R]) {
	if env.Params.DryRun {
		return
	}
	for _, f := range b.afterCommit {
		f()
	}
}

// readResult is batch n, read ahead.
type readResult[R any] struct {
	n    int
	rows []R
	err  error
}

// readAhead reads the walk's batches through q, each one once an applier has taken the one
// before, until a short batch, an error or the end of ctx. It owns a copy of args.
func (w *Walk[R]) readAhead(ctx context.Context, q Querier, args pgx.NamedArgs) <-chan readResult[R] {
	out := make(chan readResult[R])
	args = maps.Clone(args)
	go func() {
		defer close(out)
		for n := 1; ; n++ {
			var rows []R
			// Scan and Keyset are the job's code: a panic on this goroutine would end the
			// process, recovered it is batch n's error.
			err := CatchPanic(func() error {
				var err error
				if rows, err = w.read(ctx, q, args); err == nil && len(rows) >= w.BatchSize {
					for k, v := range w.Keyset(rows[len(rows)-1]) {
						args[k] = v
					}
				}
				return err
			})
			last := err != nil || len(rows) < w.BatchSize
			if len(rows) > 0 || err != nil {
				select {
				case out <- readResult[R]{n: n, rows: rows, err: err}:
				case <-ctx.Done():
					return
				}
			}
			if last {
				return
			}
		}
	}()
	return out
}

// read runs Read at the keyset position in args.
func (w *Walk[R]) read(ctx context.Context, q Querier, args pgx.NamedArgs) ([]R, error) {
	scan := w.Scan
	if scan == nil {
		scan = pgx.RowToStructByPos[R]
	}
	rows, err := q.Query(ctx, w.Read, args)
	if err != nil {
		return nil, fmt.Errorf("read: %w", err)
	}
	all, err := pgx.CollectRows(rows, scan)
	if err != nil {
		return nil, fmt.Errorf("read: %w", err)
	}
	return all, nil
}

// lock takes the batch's entity locks, in one round trip, and returns the rows whose entity
// this transaction now holds.
func (w *Walk[R]) lock(ctx context.Context, tx pgx.Tx, rows []R) ([]R, error) {
	if w.Lock == nil || len(rows) == 0 {
		return rows, nil
	}
	ids := make([]int64, 0, len(rows))
	seen := make(map[int64]bool, len(rows))
	for _, r := range rows {
		if id := w.Lock(r); !seen[id] {
			seen[id] = true
			ids = append(ids, id)
		}
	}
	locked, err := TryLockAll(ctx, tx, w.Job, ids)
	if err != nil {
		return nil, err
	}
	held := make(map[int64]bool, len(locked))
	for _, id := range locked {
		held[id] = true
	}
	out := rows[:0]
	for _, r := range rows {
		if held[w.Lock(r)] {
			out = append(out, r)
		}
	}
	return out, nil
}

// pause waits d between two batches; false when ctx ended first.
func pause(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	return backoff.Sleep(ctx, d)
}
