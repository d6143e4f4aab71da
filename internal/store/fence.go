package store

import (
	"context"
	"errors"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// ErrNotLeader means the caller's epoch is no longer the leader's: it was deposed and must
// stop writing. Nothing of the failed transaction was committed.
var ErrNotLeader = errors.New("not the leader: this replica's epoch was superseded; its writes are refused")

// Fence is a term's identity: its epoch and the random term id its election drew. A failover
// that loses commits can take the epoch number back and elect another replica under it; it
// cannot draw the same term id, so a write of the lost term never passes the new term's
// fence (docs/design.md, "Failover of PostgreSQL").
//
// Partition names the fence's row: 0 is the coordinator's (scheduler_leader, which also
// fences the built-in jobs and a one-partition cluster's every job), p ≥ 1 the row of
// partition p in scheduler_partitions.
type Fence struct {
	Partition int
	Epoch     int64
	TermID    uuid.UUID
}

func (f Fence) String() string {
	if f.Partition == 0 {
		return fmt.Sprintf("epoch %d (term %s)", f.Epoch, f.TermID)
	}
	return fmt.Sprintf("partition %d epoch %d (term %s)", f.Partition, f.Epoch, f.TermID)
}

// Fenced runs fn in a transaction that may commit only while f is the current leader's term
// (docs/design.md, guarantee 1). Every write of a leader goes through it: the engine's claims,
// pick-ups and finishes (the *Tx methods) and every job body's writes (job.Env.Tx hands the
// body this *Tx as a pgx.Tx).
//
// It reads the leader row FOR KEY SHARE first: a stale epoch fails at once with
// ErrNotLeader, and the share lock, held until commit, makes the next election's epoch bump
// (FOR UPDATE) wait until this transaction has ended — so once a new epoch exists, no write
// of an older one can still commit. KEY SHARE rather than SHARE so that the holder's
// heartbeat (an UPDATE of renewed_at alone) never waits for the term's own transactions. fn's error rolls the transaction back and is returned as is.
func (db *DB) Fenced(ctx context.Context, f Fence, fn func(tx *Tx) error) error {
	return pgx.BeginFunc(ctx, db.pool, func(ptx pgx.Tx) error {
		tx := newTx(ptx, f)
		if err := tx.checkTerm(ctx, f); err != nil {
			return err
		}
		return fn(tx)
	})
}

// checkTerm takes the fence inside the transaction. The whole identity is compared: the
// epoch alone can be named twice after a rollback.
func (tx *Tx) checkTerm(ctx context.Context, f Fence) error {
	var current LeaderRow
	// One statement: pgx sends a QueryRow at once, so a second one before the first is
	// scanned finds the connection busy. FOR KEY SHARE: an election's FOR UPDATE waits for
	// it, while the holder's renewal (an UPDATE of renewed_at, no key) does not.
	var row pgx.Row
	if f.Partition == 0 {
		row = tx.QueryRow(ctx, `SELECT `+leaderColumns+` FROM scheduler_leader WHERE id = 1 FOR KEY SHARE`)
	} else {
		row = tx.QueryRow(ctx, `SELECT `+partitionTermColumns+` FROM scheduler_partitions WHERE partition_id = $1 FOR KEY SHARE`, f.Partition)
	}
	if err := scanLeader(row, &current); err != nil {
		return fmt.Errorf("read the term of %s: %w", f, err)
	}
	if cur := current.Fence(); cur.Epoch != f.Epoch || cur.TermID != f.TermID {
		return fmt.Errorf("%w (holds %s, current is epoch %d (term %s))", ErrNotLeader, f, cur.Epoch, cur.TermID)
	}
	return nil
}
