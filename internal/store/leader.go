package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// scheduler_leader, and the leader's lock session: the dedicated connection that holds the
// session-level leader lock. It must be a session of its own (the lock lives and dies with
// it, and PostgreSQL releases it the moment that connection drops), so it is not a pooled
// handle, but its queries read the same way: named methods on *LockSession.

// LeaderRow is the scheduler_leader row: who leads, under which term, since when.
type LeaderRow struct {
	InstanceID string
	Epoch      int64
	// TermID is drawn at random by the epoch bump: with Epoch it names the term in a way a
	// rollback of the database cannot recreate (zero before the first election).
	TermID uuid.UUID
	// Timeline is the PostgreSQL timeline the term began on (0 before migration 0015).
	Timeline int64
	Since    time.Time
}

// Fence is the term's identity the fence compares.
func (r LeaderRow) Fence() Fence { return Fence{Epoch: r.Epoch, TermID: r.TermID} }

// leaderColumns reads a LeaderRow in scanLeader's order; a missing term id reads as zero.
const leaderColumns = `epoch, coalesce(instance_id, ''), coalesce(term_id, '00000000-0000-0000-0000-000000000000'),
	coalesce(timeline, 0), since`

// partitionTermColumns reads a scheduler_partitions row as a LeaderRow, in scanLeader's order.
const partitionTermColumns = `epoch, coalesce(holder, ''), coalesce(term_id, '00000000-0000-0000-0000-000000000000'),
	coalesce(timeline, 0), since`

func scanLeader(row pgx.Row, r *LeaderRow) error {
	var since *time.Time
	if err := row.Scan(&r.Epoch, &r.InstanceID, &r.TermID, &r.Timeline, &since); err != nil {
		return err
	}
	if since != nil {
		r.Since = *since
	}
	return nil
}

// Leader reads the leader row, for GET /v1/leader. Before any election InstanceID is ""
// and Epoch 0.
func (q queries) Leader(ctx context.Context) (LeaderRow, error) {
	var r LeaderRow
	if err := scanLeader(q.q.QueryRow(ctx, `SELECT `+leaderColumns+` FROM scheduler_leader WHERE id = 1`), &r); err != nil {
		return r, fmt.Errorf("read leader row: %w", err)
	}
	return r, nil
}

// leaderLockKey is the key of the leader lock, a session-level advisory lock: computed by
// the server from a fixed name, so every replica and version agrees on it.
const leaderLockKey = `pg_catalog.hashtextextended('scheduler-leader', 0)`

// isLeaderLock is the condition on a pg_locks row l that it is the leader lock of this
// database, held or awaited: its 64-bit key as pg_locks shows it (high and low halves,
// objsubid 1).
const isLeaderLock = advisoryOnThisDB + ` AND ` + advisoryKeyOf + ` = ` + leaderLockKey

// LockSession is a dedicated connection for the leader lock, outside the pool.
type LockSession struct {
	conn *pgx.Conn
}

// OpenLockSession connects a new lock session. A backend blocked in pg_advisory_lock does
// not read its socket; client_connection_check_interval makes it notice that this replica
// died instead of taking the lock for a dead client.
func (db *DB) OpenLockSession(ctx context.Context) (*LockSession, error) {
	conn, err := db.connect(ctx)
	if err != nil {
		return nil, err
	}
	if _, err := conn.Exec(ctx, `SET client_connection_check_interval = 1000`); err != nil {
		closeConn(conn)
		return nil, fmt.Errorf("prepare the lock session: %w", err)
	}
	return &LockSession{conn: conn}, nil
}

// Close ends the session, which releases the leader lock if it holds it. It waits at most
// a second: a dead connection is dropped rather than closed politely.
func (s *LockSession) Close() { closeConn(s.conn) }

// closeConn closes conn and its socket at once. After a failed query pgx closes the socket
// only once its cancel request is answered or gives up (15 s), and until then the server
// may keep the session, and the leader lock with it, for a replica that has already stepped
// down: a follower would wait that long behind a proxy or a network that still carries the
// close.
func closeConn(conn *pgx.Conn) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_ = conn.Close(ctx)
	if c := conn.PgConn().Conn(); c != nil {
		_ = c.Close()
	}
}

// Lock waits inside PostgreSQL until the session holds the leader lock, so a released lock
// is taken over at once, without polling. Cancelling ctx aborts the wait; the session may
// then be unusable and should be closed.
//
// The wait is a series of statements of at most leaderLockWaitSlice each, not one. A
// statement holds its snapshot until it ends, and a snapshot keeps VACUUM from removing any
// row version that became dead after it was taken, in every table of the database: one wait
// lasting a whole term left every run's old version in job_runs and its indexes, so each
// minute's claim of 10 000 slots read more of them than the last (423 ms in the second
// minute, 1.1 s in the sixth). Between two statements the lock stays where it is, so a
// release during the gap is taken by the next statement at once.
func (s *LockSession) Lock(ctx context.Context) error {
	for {
		if _, err := s.conn.Exec(ctx, waitForLeaderLockSQL); err != nil {
			return err
		}
		var held bool
		if err := s.conn.QueryRow(ctx, holdsLeaderLockSQL).Scan(&held); err != nil {
			return err
		}
		if held {
			return nil
		}
	}
}

// leaderLockWaitSlice bounds each statement of Lock's wait, and so how far behind the
// database's VACUUM horizon a follower holds: a second is under any autovacuum's interval
// and costs two statements a second per follower.
const leaderLockWaitSlice = time.Second

// waitForLeaderLockSQL waits at most leaderLockWaitSlice for the leader lock. The wait's end
// is an error (lock_timeout) caught inside the block, so the server does not log one every
// second; the setting is local to the block's transaction.
var waitForLeaderLockSQL = fmt.Sprintf(`DO $$
BEGIN
	PERFORM pg_catalog.set_config('lock_timeout', '%d', true);
	PERFORM pg_catalog.pg_advisory_lock(%s);
EXCEPTION WHEN lock_not_available THEN
	NULL;
END $$`, leaderLockWaitSlice.Milliseconds(), leaderLockKey)

// holdsLeaderLockSQL reports whether the session holds the leader lock.
const holdsLeaderLockSQL = `SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_locks l
	WHERE ` + isLeaderLock + ` AND l.pid = pg_catalog.pg_backend_pid() AND l.granted)`

// Unlock releases the leader lock held by the session.
func (s *LockSession) Unlock(ctx context.Context) error {
	_, err := s.conn.Exec(ctx, `SELECT pg_catalog.pg_advisory_unlock(`+leaderLockKey+`)`)
	return err
}

// Renew is the leader's heartbeat, on the session: it stamps renewed_at on the leader row
// while f is still its term, and reads the current term. It fails when the lock session is
// gone, and tells a leader that someone else has bumped the epoch. A follower that finds
// renewed_at older than the lease ends the lock's backend (EndStaleLeader): so renewed_at
// is the proof that the leader's process still runs, as the lock is that its connection
// lives. The update does not wait for the fence's KEY SHARE row locks; should anything
// else hold the row for longer than wait, the heartbeat reads the term without renewing.
func (s *LockSession) Renew(ctx context.Context, f Fence, wait time.Duration) (Fence, error) {
	const renew = `
		UPDATE scheduler_leader SET renewed_at = clock_timestamp()
		WHERE id = 1 AND epoch = $1 AND term_id = $2`
	err := pgx.BeginFunc(ctx, s.conn, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT set_config('lock_timeout', $1, true)`, fmt.Sprintf("%dms", max(wait.Milliseconds(), 1))); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, renew, f.Epoch, f.TermID)
		return err
	})
	var pgErr *pgconn.PgError
	if err != nil && !(errors.As(err, &pgErr) && pgErr.Code == lockNotAvailable) {
		return Fence{}, err
	}
	var r LeaderRow
	err = scanLeader(s.conn.QueryRow(ctx, `SELECT `+leaderColumns+` FROM scheduler_leader WHERE id = 1`), &r)
	return r.Fence(), err
}

// lockNotAvailable is SQLSTATE 55P03, raised when lock_timeout expires.
const lockNotAvailable = "55P03"

// BumpEpoch makes instanceID the leader under a new epoch, on the session (which holds the
// leader lock). It returns the previous and the new leader row and the backends it had to
// terminate.
//
// The bump first locks the row FOR UPDATE, which waits for every in-flight fenced
// transaction of the old epoch (they hold FOR KEY SHARE until they end), and only then stamps
// since = clock_timestamp(): so no write of an older epoch can commit after the new
// epoch's since (docs/design.md guarantee 8). The wait is bounded by lease (lock_timeout);
// when it expires, whatever holds it up is terminated before retrying (bumpBlockersSQL):
// found by the locks it holds, not by the name it gives itself.
func (s *LockSession) BumpEpoch(ctx context.Context, instanceID string, lease time.Duration) (old, cur LeaderRow, terminated []Backend, err error) {
	const readOld = `SELECT ` + leaderColumns + ` FROM scheduler_leader WHERE id = 1`
	// Waits for the old epoch's fenced transactions.
	const lockRow = `SELECT 1 FROM scheduler_leader WHERE id = 1 FOR UPDATE`
	// A new random term id: the term's identity, which a rollback cannot recreate. The first
	// bump on a new timeline (a promoted standby) also jumps the epoch to timeline << 32: every
	// epoch issued on timeline t stays below (t+1) << 32 (fewer than 2^32 bumps a timeline),
	// and a promoted standby's timeline is above its old primary's, so no term the lost
	// primary began can have had the number. Epochs stay below 2^53 (exact as JSON numbers)
	// for 2^21 timelines. A row from before migration 0015 has no timeline: no jump.
	const bump = `
		WITH now_on AS (SELECT scheduler_timeline() AS tl)
		UPDATE scheduler_leader l
		SET epoch = CASE WHEN l.timeline <> now_on.tl
		                 THEN greatest(l.epoch + 1, now_on.tl << 32)
		                 ELSE l.epoch + 1 END,
		    instance_id = $1, since = clock_timestamp(), renewed_at = clock_timestamp(),
		    term_id = gen_random_uuid(), timeline = now_on.tl
		FROM now_on
		WHERE l.id = 1
		RETURNING ` + leaderColumns

	if err = scanLeader(s.conn.QueryRow(ctx, readOld), &old); err != nil {
		return old, cur, nil, fmt.Errorf("read leader row: %w", err)
	}
	for {
		cur, err = bumpTerm(ctx, s.conn, lease, lockRow, nil, bump, instanceID)
		if !errors.Is(err, errBumpWaited) {
			if err != nil {
				err = fmt.Errorf("bump leader epoch: %w", err)
			}
			return old, cur, terminated, err
		}
		done, err := endBlockers(ctx, s.conn, bumpBlockersSQL, ApplicationNamePrefix+old.InstanceID)
		terminated = append(terminated, done...)
		if err != nil {
			return old, cur, terminated, err
		}
	}
}

// errBumpWaited means an epoch bump waited its whole lock_timeout for the old term's
// fenced transactions and changed nothing.
var errBumpWaited = errors.New("the epoch bump waited its whole time for the old term's transactions")

// bumpTerm is one attempt at an election's epoch bump, shared by the leader row and the
// partitions' rows: in one transaction on conn, lockRow locks the term's row FOR UPDATE,
// which waits for every in-flight fenced transaction of the old term (they hold a share lock
// until they end), and only then bump stamps the new term (since = clock_timestamp()), so no
// write of an older term can commit after the new term's since (docs/design.md guarantee 8).
// The wait is bounded by wait (lock_timeout); when it expires the attempt returns
// errBumpWaited and the caller decides what to end before trying again.
func bumpTerm(ctx context.Context, conn *pgx.Conn, wait time.Duration, lockRow string, lockArgs []any, bump string, bumpArgs ...any) (LeaderRow, error) {
	// lock_timeout is set with set_config(..., true), the same as SET LOCAL, because SET
	// does not accept parameters.
	const setLockTimeout = `SELECT set_config('lock_timeout', $1, true)`
	var cur LeaderRow
	err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, setLockTimeout, fmt.Sprintf("%dms", max(wait.Milliseconds(), 1))); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, lockRow, lockArgs...); err != nil {
			return err
		}
		return scanLeader(tx.QueryRow(ctx, bump, bumpArgs...), &cur)
	})
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == lockNotAvailable {
		return cur, errBumpWaited
	}
	return cur, err
}

// endBlockers terminates the backends query finds (with args) holding up an epoch bump.
func endBlockers(ctx context.Context, conn *pgx.Conn, query string, args ...any) ([]Backend, error) {
	rows, err := conn.Query(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("find what holds up the epoch bump: %w", err)
	}
	blockers, err := scanBackends(rows)
	if err != nil {
		return nil, fmt.Errorf("find what holds up the epoch bump: %w", err)
	}
	done, err := terminateBackends(ctx, conn, blockers)
	if err != nil {
		return done, fmt.Errorf("end what holds up the epoch bump: %w", err)
	}
	return done, nil
}

// bumpBlockersSQL finds the backends to terminate when the epoch bump waited the whole
// lease, never this lock session:
//   - every backend holding or awaiting a lock on scheduler_leader beyond a plain read's
//     (FOR SHARE takes RowShareLock, an UPDATE RowExclusiveLock, LOCK TABLE more; a queued
//     waiter blocks those behind it), whatever its login or name: a half-dead leader's
//     fenced transaction, or a job's backend that renamed itself and traps cancels;
//   - the old leader's remaining backends ($1 is scheduler:<old instance>), by the
//     scheduler's login as well as the name, since any login can take the name.
const bumpBlockersSQL = `
WITH on_leader_row AS (
    SELECT l.pid FROM pg_locks l
    WHERE l.relation = 'scheduler_leader'::regclass
      AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
      AND (NOT l.granted OR l.mode <> 'AccessShareLock')
), old_leader AS (
    SELECT a.pid FROM pg_stat_activity a
    WHERE a.datname = current_database() AND a.usename = current_user AND a.application_name = $1
)
SELECT ` + backendColumns + `
FROM pg_stat_activity a
WHERE a.pid IN (SELECT pid FROM on_leader_row UNION SELECT pid FROM old_leader)
  AND a.pid <> pg_backend_pid()
ORDER BY a.pid`

// LockTaken describes the moment this session got the leader lock, read on the lock
// connection right after pg_advisory_lock returned and before the epoch bump.
type LockTaken struct {
	// Key is the leader lock's pg_advisory_lock key, as pg_locks shows it.
	Key int64
	// At is the database clock when the lock was taken.
	At time.Time
	// PreviousLastSeen is the previous leader's last instance heartbeat if its
	// scheduler_instances row still says it leads (it died or hung rather than resigning or
	// stepping down); nil otherwise.
	PreviousLastSeen *time.Time
}

// LockTaken reads LockTaken; the session has just taken the leader lock.
func (s *LockSession) LockTaken(ctx context.Context) (LockTaken, error) {
	var t LockTaken
	err := s.conn.QueryRow(ctx, `
		SELECT `+leaderLockKey+`, clock_timestamp(), i.last_seen_at
		FROM scheduler_leader l
		LEFT JOIN scheduler_instances i ON i.instance_id = l.instance_id AND i.is_leader
		WHERE l.id = 1`).Scan(&t.Key, &t.At, &t.PreviousLastSeen)
	if err != nil {
		return t, fmt.Errorf("read the previous leader's last heartbeat: %w", err)
	}
	return t, nil
}
