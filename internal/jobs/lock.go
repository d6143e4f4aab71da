package jobs

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
)

// Per-entity locks (DESIGN.md, "The jobs"). Every job takes, for each entity it is about to
// change, the transaction-level advisory lock
//
//	pg_try_advisory_xact_lock(hashtextextended('<job>:<entity id>', 0))
//
// and skips (and counts as skipped_locked) the entities it cannot get at once, so that two
// copies of a job running together split the work instead of queueing behind each other or
// both applying the same change. The lock is released by the commit or rollback of the batch's
// transaction. Keys are 64-bit (hashtextextended), unlike the seeds' 32-bit hashtext, whose
// collisions made unrelated entities skip each other.
//
// Set-based statements write the expression inline, with the job name as a bound parameter and
// the id cast to text:
//
//	locked AS MATERIALIZED (
//	    SELECT id FROM batch
//	    WHERE pg_try_advisory_xact_lock(hashtextextended($1::text || ':' || id::text, 0))
//	)
//
// The batch itself is a MATERIALIZED CTE with its LIMIT, and the try-lock a separate CTE over
// it, so that the planner cannot evaluate the lock on rows outside the batch.

// TryLockAll tries to take job's lock on each of ids inside tx, in one round trip, and returns
// the ids it got, in the order given. The others are held by another transaction.
func TryLockAll(ctx context.Context, tx pgx.Tx, job string, ids []int64) ([]int64, error) {
	const q = `
SELECT id
FROM unnest($2::bigint[]) WITH ORDINALITY AS t (id, n)
WHERE pg_try_advisory_xact_lock(hashtextextended($1::text || ':' || id::text, 0))
ORDER BY n`
	rows, err := tx.Query(ctx, q, job, ids)
	if err != nil {
		return nil, fmt.Errorf("try-lock %d %s entities: %w", len(ids), job, err)
	}
	locked, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return nil, fmt.Errorf("try-lock %d %s entities: %w", len(ids), job, err)
	}
	return locked, nil
}

// memberBatch is what one batch statement of plan-change or status-sync reports.
type memberBatch struct {
	seen      int64            // due members the batch read
	locked    int64            // of those, the ones whose lock this run got
	changed   int64            // of those, the ones the guarded UPDATE changed
	written   int64            // history rows written (plan-change; = changed otherwise)
	perTenant map[string]int64 // changed, per tenant id
	lastDate  pgtype.Date      // the batch's last keyset position
	lastID    int64
}

// walkMembers runs stmt batch after batch, each in its own fenced transaction, walking the
// members keyset (date, id) from the start until a batch comes back short. stmt takes $1 the
// job name (lock key prefix), $2 today, $3/$4 the keyset position after which to read, $5 the
// batch size, then extra; it returns the columns of memberBatch.
func walkMembers(ctx context.Context, env *Env, job, stmt string, batchSize int, today time.Time, extra ...any) (Stats, error) {
	var st Stats
	b := memberBatch{lastDate: pgtype.Date{InfinityModifier: pgtype.NegativeInfinity, Valid: true}}
	for n := 1; ; n++ {
		if err := ctx.Err(); err != nil {
			return st, err
		}
		args := append([]any{job, pgtype.Date{Time: today, Valid: true}, b.lastDate, b.lastID, batchSize}, extra...)
		b.perTenant = nil // JSON decoding into a non-nil map would merge into the last batch's
		err := inBatchTx(ctx, env, func(tx pgx.Tx) error {
			return tx.QueryRow(ctx, stmt, args...).Scan(
				&b.seen, &b.locked, &b.changed, &b.written, &b.perTenant, &b.lastDate, &b.lastID)
		})
		if err != nil {
			return st, fmt.Errorf("%s batch %d: %w", job, n, err)
		}
		st.Processed += b.seen
		st.Changed += b.changed
		st.SkippedLocked += b.seen - b.locked
		// Locked but unchanged: another run changed the member between this statement's
		// snapshot and its lock, so the guard refused a second change.
		if stale := b.locked - b.changed; stale > 0 {
			st.Count("stale", stale)
		}
		// The unique index refused a history row the guard let through: a member changed
		// without its history row. Should never happen; counted as an error and logged.
		if lost := b.changed - b.written; lost > 0 {
			st.Errors += lost
			st.Count("history_conflict", lost)
			env.Log.Error("history rows refused by the unique index; investigate members changed twice",
				"batch", n, "count", lost)
		}
		for tenant, c := range b.perTenant {
			st.Count("tenant:"+tenant, c)
		}
		env.Log.Debug("batch done", "batch", n, "seen", b.seen, "changed", b.changed,
			"skipped_locked", b.seen-b.locked, "dry_run", env.Params.DryRun)
		if b.seen < int64(batchSize) {
			return st, nil
		}
	}
}

// utcDate is t's calendar date in UTC, as midnight UTC.
func utcDate(t time.Time) time.Time {
	y, m, d := t.UTC().Date()
	return time.Date(y, m, d, 0, 0, 0, 0, time.UTC)
}
