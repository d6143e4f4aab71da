package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// LeaderRow is the scheduler_leader row: who leads, under which fencing epoch, since when.
type LeaderRow struct {
	InstanceID string    `json:"instance_id"`
	Epoch      int64     `json:"epoch"`
	Since      time.Time `json:"since"`
}

// Leader reads the leader row, for GET /v1/leader. Before any election InstanceID is ""
// and Epoch 0.
func (db *DB) Leader(ctx context.Context) (LeaderRow, error) {
	var r LeaderRow
	var id *string
	var since *time.Time
	err := db.Pool.QueryRow(ctx, `SELECT epoch, instance_id, since FROM scheduler_leader WHERE id = 1`).
		Scan(&r.Epoch, &id, &since)
	if err != nil {
		return r, fmt.Errorf("read leader row: %w", err)
	}
	if id != nil {
		r.InstanceID = *id
	}
	if since != nil {
		r.Since = *since
	}
	return r, nil
}

// The leader lock is the session-level advisory lock keyed by
// hashtextextended('scheduler-leader', 0): computed by the server from a fixed name, so every
// replica and version agrees on it.

// LockLeader waits inside PostgreSQL until conn holds the leader lock, so a released lock
// is taken over at once, without polling. Cancelling ctx aborts the wait; conn may then be
// unusable and should be closed.
func LockLeader(ctx context.Context, conn *pgx.Conn) error {
	_, err := conn.Exec(ctx, `SELECT pg_advisory_lock(hashtextextended('scheduler-leader', 0))`)
	return err
}

// UnlockLeader releases the leader lock held by conn's session.
func UnlockLeader(ctx context.Context, conn *pgx.Conn) error {
	_, err := conn.Exec(ctx, `SELECT pg_advisory_unlock(hashtextextended('scheduler-leader', 0))`)
	return err
}

// LeaderEpoch reads the current epoch on conn: the leader's heartbeat, which fails when the
// lock session is gone and tells a leader that someone else has bumped the epoch.
func LeaderEpoch(ctx context.Context, conn *pgx.Conn) (int64, error) {
	var epoch int64
	err := conn.QueryRow(ctx, `SELECT epoch FROM scheduler_leader WHERE id = 1`).Scan(&epoch)
	return epoch, err
}

// lockNotAvailable is SQLSTATE 55P03, raised when lock_timeout expires.
const lockNotAvailable = "55P03"

// BumpEpoch makes instanceID the leader under a new epoch, on conn (which holds the leader
// lock). It returns the previous and the new leader row and how many of the old leader's
// backends it had to terminate.
//
// The bump first locks the row FOR UPDATE, which waits for every in-flight fenced
// transaction of the old epoch (they hold FOR SHARE until they end), and only then stamps
// since = clock_timestamp(): so no write of an older epoch can commit after the new
// epoch's since (DESIGN.md guarantee 8). The wait is bounded by lease (lock_timeout); when
// it expires, the old leader is half dead, and its remaining backends, found by their
// application_name, are terminated before retrying.
func BumpEpoch(ctx context.Context, conn *pgx.Conn, instanceID string, lease time.Duration) (old, cur LeaderRow, terminated int, err error) {
	const readOld = `
		SELECT epoch, coalesce(instance_id, ''), since FROM scheduler_leader WHERE id = 1`
	// lock_timeout is set with set_config(..., true), the same as SET LOCAL, because SET
	// does not accept parameters.
	const setLockTimeout = `SELECT set_config('lock_timeout', $1, true)`
	// Waits for the old epoch's FOR SHARE holders.
	const lockRow = `SELECT 1 FROM scheduler_leader WHERE id = 1 FOR UPDATE`
	const bump = `
		UPDATE scheduler_leader
		SET epoch = epoch + 1, instance_id = $1, since = clock_timestamp()
		WHERE id = 1
		RETURNING epoch, instance_id, since`
	// Terminates the deposed leader's backends, never this lock session.
	const terminate = `
		SELECT count(*) FILTER (WHERE pg_terminate_backend(pid))
		FROM pg_stat_activity
		WHERE application_name = $1 AND pid <> pg_backend_pid() AND datname = current_database()`

	var oldSince *time.Time
	if err = conn.QueryRow(ctx, readOld).Scan(&old.Epoch, &old.InstanceID, &oldSince); err != nil {
		return old, cur, 0, fmt.Errorf("read leader row: %w", err)
	}
	if oldSince != nil {
		old.Since = *oldSince
	}
	for {
		err = pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, setLockTimeout, fmt.Sprintf("%dms", lease.Milliseconds())); err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, lockRow); err != nil {
				return err
			}
			return tx.QueryRow(ctx, bump, instanceID).Scan(&cur.Epoch, &cur.InstanceID, &cur.Since)
		})
		var pgErr *pgconn.PgError
		if err == nil || !errors.As(err, &pgErr) || pgErr.Code != lockNotAvailable {
			if err != nil {
				err = fmt.Errorf("bump leader epoch: %w", err)
			}
			return old, cur, terminated, err
		}
		var n int
		if err := conn.QueryRow(ctx, terminate, ApplicationNamePrefix+old.InstanceID).Scan(&n); err != nil {
			return old, cur, terminated, fmt.Errorf("terminate the old leader's backends: %w", err)
		}
		terminated += n
	}
}
