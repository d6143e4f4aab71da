package jobcontract

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// Per-entity locks (docs/design.md, "The jobs"). Every job takes, for each entity it is about
// to change, the transaction-level advisory lock
//
//	pg_try_advisory_xact_lock(hashtextextended('<job>:<entity id>', 0))
//
// and skips (and counts as skipped_locked) the entities it cannot get at once, so that two
// copies of a job running together split the work instead of queueing behind each other or
// both applying the same change. The lock is released by the commit or rollback of the batch's
// transaction. Keys are 64-bit (hashtextextended), unlike the seeds' 32-bit hashtext, whose
// collisions made unrelated entities skip each other. Walk takes them for every job.

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
