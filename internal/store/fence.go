package store

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// ErrNotLeader means the caller's epoch is no longer the leader's: it was deposed and must
// stop writing. Nothing of the failed transaction was committed.
var ErrNotLeader = errors.New("not the leader: this replica's epoch was superseded; its writes are refused")

// Fenced runs fn in a transaction that may commit only while epoch is the current leader's
// (docs/design.md, guarantee 1). Every write of a leader goes through it: the engine's claims,
// pick-ups and finishes (the *Tx methods) and every job body's writes (jobs.Env.Tx hands the
// body this *Tx as a pgx.Tx).
//
// It reads the leader row FOR SHARE first: a stale epoch fails at once with ErrNotLeader,
// and the share lock, held until commit, makes the next election's epoch bump wait until
// this transaction has ended — so once a new epoch exists, no write of an older one can
// still commit. fn's error rolls the transaction back and is returned as is.
func (db *DB) Fenced(ctx context.Context, epoch int64, fn func(tx *Tx) error) error {
	return pgx.BeginFunc(ctx, db.pool, func(ptx pgx.Tx) error {
		tx := newTx(ptx, epoch)
		if err := tx.checkEpoch(ctx); err != nil {
			return err
		}
		return fn(tx)
	})
}

// checkEpoch takes the fence inside the transaction.
func (tx *Tx) checkEpoch(ctx context.Context) error {
	epoch := tx.epoch
	var current int64
	if err := tx.QueryRow(ctx, `SELECT epoch FROM scheduler_leader WHERE id = 1 FOR SHARE`).Scan(&current); err != nil {
		return fmt.Errorf("read leader epoch: %w", err)
	}
	if current != epoch {
		return fmt.Errorf("%w (holds epoch %d, current is %d)", ErrNotLeader, epoch, current)
	}
	return nil
}
