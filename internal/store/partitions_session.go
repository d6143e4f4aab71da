package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// PartitionSession is one replica's dedicated connection for the locks of every partition
// it holds: one connection whatever the count, so 3 replicas × 64 partitions is 3
// connections, not 192. Like LockSession it is outside the pool, since the locks live and
// die with it.
type PartitionSession struct {
	conn *pgx.Conn
}

// OpenPartitionSession connects a new partition lock session, set up as a LockSession.
func (db *DB) OpenPartitionSession(ctx context.Context) (*PartitionSession, error) {
	s, err := db.OpenLockSession(ctx)
	if err != nil {
		return nil, err
	}
	return &PartitionSession{conn: s.conn}, nil
}

// Close ends the session, which releases every partition lock it holds.
func (s *PartitionSession) Close() { closeConn(s.conn) }

// Ping checks that the session's connection, and with it every lock it holds, is alive.
func (s *PartitionSession) Ping(ctx context.Context) error { return s.conn.Ping(ctx) }

// PID is the session's backend process id, as pg_locks shows it.
func (s *PartitionSession) PID() uint32 { return s.conn.PgConn().PID() }

// TryLock takes partition p's lock if nobody holds it, and in the same statement stamps the
// row's renewed_at: a survey meanwhile finds the backend active, then the row fresh, never
// a lock held by an idle backend with an old renewal, which is what a paused holder looks
// like (SurveyPartitions).
func (s *PartitionSession) TryLock(ctx context.Context, p int) (bool, error) {
	q := `
		WITH got AS MATERIALIZED (SELECT pg_catalog.pg_try_advisory_lock(` + fmt.Sprintf(partitionLockKey, "$1::bigint") + `) AS ok),
		stamp AS (
		    UPDATE scheduler_partitions SET renewed_at = clock_timestamp()
		    WHERE partition_id = $1 AND (SELECT ok FROM got)
		    RETURNING 1
		)
		SELECT ok FROM got`
	var ok bool
	if err := s.conn.QueryRow(ctx, q, p).Scan(&ok); err != nil {
		return false, fmt.Errorf("try partition %d's lock: %w", p, err)
	}
	return ok, nil
}

// Unlock releases partition p's lock; a term of it that the session still names is marked
// released first (renewed_at NULL), so that it reads as nobody's at once.
func (s *PartitionSession) Unlock(ctx context.Context, f Fence) error {
	const released = `UPDATE scheduler_partitions SET renewed_at = NULL WHERE partition_id = $1 AND epoch = $2 AND term_id = $3`
	if _, err := s.conn.Exec(ctx, released, f.Partition, f.Epoch, f.TermID); err != nil {
		return fmt.Errorf("mark partition %d released: %w", f.Partition, err)
	}
	q := `SELECT pg_catalog.pg_advisory_unlock(` + fmt.Sprintf(partitionLockKey, "$1::bigint") + `)`
	if _, err := s.conn.Exec(ctx, q, f.Partition); err != nil {
		return fmt.Errorf("release partition %d's lock: %w", f.Partition, err)
	}
	return nil
}

// Stamp stamps renewed_at on partitions whose lock the replica holds while their elections
// wait (store.PartitionSession.Elect): a lock held by an idle backend with an old renewal is
// what a paused holder looks like (SurveyPartitions), and a replica that takes many
// partitions at once elects them one after another, for longer than the lease on a busy
// machine.
func (s *PartitionSession) Stamp(ctx context.Context, partitions []int) error {
	ids := make([]int32, len(partitions))
	for i, p := range partitions {
		ids[i] = int32(p)
	}
	if _, err := s.conn.Exec(ctx, `UPDATE scheduler_partitions SET renewed_at = clock_timestamp() WHERE partition_id = ANY($1::int[])`, ids); err != nil {
		return fmt.Errorf("stamp the partitions whose elections wait: %w", err)
	}
	return nil
}

// ErrElectionWaiting means a partition's election waited its slice for the old term's
// fenced transactions: the caller keeps the lock and tries again, with end set once the
// whole lease has passed.
var ErrElectionWaiting = errors.New("the election waits for the old term's transactions")

// Elect makes instanceID partition p's holder under a new term, on the session (which holds
// p's lock): bumpTerm on its row, waiting at most wait. The lock session serves every
// partition of the replica, and the heartbeat of the others must not wait behind one
// election, so a wait that ends returns ErrElectionWaiting; with end set (the caller has
// waited the lease) it first terminates what holds the row up: other logins' backends and
// the old holder's that hold a lock on scheduler_partitions (never another holder's
// transactions of other partitions). handovers counts elections that changed the holder.
func (s *PartitionSession) Elect(ctx context.Context, p int, instanceID string, wait time.Duration, end bool) (old, cur LeaderRow, terminated []Backend, err error) {
	const readOld = `SELECT ` + partitionTermColumns + ` FROM scheduler_partitions WHERE partition_id = $1`
	const lockRow = `SELECT 1 FROM scheduler_partitions WHERE partition_id = $1 FOR UPDATE`
	const bump = `
		WITH now_on AS (SELECT scheduler_timeline() AS tl)
		UPDATE scheduler_partitions l
		SET epoch = CASE WHEN l.timeline <> now_on.tl
		                 THEN greatest(l.epoch + 1, now_on.tl << 32)
		                 ELSE l.epoch + 1 END,
		    handovers = l.handovers + CASE WHEN l.holder IS NOT NULL AND l.holder <> $2 THEN 1 ELSE 0 END,
		    holder = $2, since = clock_timestamp(), renewed_at = clock_timestamp(),
		    term_id = gen_random_uuid(), timeline = now_on.tl
		FROM now_on
		WHERE l.partition_id = $1
		RETURNING ` + partitionTermColumns
	if err = scanLeader(s.conn.QueryRow(ctx, readOld, p), &old); err != nil {
		return old, cur, nil, fmt.Errorf("read partition %d's row: %w", p, err)
	}
	if end {
		terminated, err = endBlockers(ctx, s.conn, partitionBlockersSQL, ApplicationNamePrefix+old.InstanceID)
		if err != nil {
			return old, cur, terminated, err
		}
	}
	cur, err = bumpTerm(ctx, s.conn, wait, lockRow, []any{p}, bump, p, instanceID)
	switch {
	case errors.Is(err, errBumpWaited):
		return old, cur, terminated, ErrElectionWaiting
	case err != nil:
		return old, cur, terminated, fmt.Errorf("bump partition %d's epoch: %w", p, err)
	}
	return old, cur, terminated, nil
}

// partitionBlockersSQL finds, for a partition's election that waited the lease, the backends
// holding or awaiting a lock on scheduler_partitions beyond a plain read's that are another
// login's (a job's, whatever it calls itself) or the old holder's ($1 is scheduler:<old
// holder>, checked with the scheduler's login since any login can take the name).
const partitionBlockersSQL = `
WITH on_rows AS (
    SELECT l.pid FROM pg_locks l
    WHERE l.relation = 'scheduler_partitions'::regclass
      AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
      AND (NOT l.granted OR l.mode <> 'AccessShareLock')
)
SELECT ` + backendColumns + `
FROM pg_stat_activity a
WHERE a.pid IN (SELECT pid FROM on_rows) AND a.pid <> pg_backend_pid()
  AND (a.usename IS DISTINCT FROM current_user OR a.application_name = $1)
ORDER BY a.pid`

// Renew is the partitions' heartbeat, one statement for all of them: it stamps renewed_at on
// the row of every term in terms that is still current, and returns the partitions it
// renewed. A term missing from the answer was replaced by another replica's election; an
// error means the session (and with it every lock) may be gone.
func (s *PartitionSession) Renew(ctx context.Context, terms []Fence) (map[int]bool, error) {
	ids := make([]int32, len(terms))
	epochs := make([]int64, len(terms))
	termIDs := make([]string, len(terms))
	for i, f := range terms {
		ids[i], epochs[i], termIDs[i] = int32(f.Partition), f.Epoch, f.TermID.String()
	}
	const renew = `
		UPDATE scheduler_partitions p SET renewed_at = clock_timestamp()
		FROM unnest($1::int[], $2::bigint[], $3::uuid[]) AS t(partition_id, epoch, term_id)
		WHERE p.partition_id = t.partition_id AND p.epoch = t.epoch AND p.term_id = t.term_id
		RETURNING p.partition_id`
	rows, err := s.conn.Query(ctx, renew, ids, epochs, termIDs)
	if err != nil {
		return nil, fmt.Errorf("renew the partitions' terms: %w", err)
	}
	renewed, err := pgx.CollectRows(rows, pgx.RowTo[int])
	if err != nil {
		return nil, fmt.Errorf("renew the partitions' terms: %w", err)
	}
	out := make(map[int]bool, len(renewed))
	for _, p := range renewed {
		out[p] = true
	}
	return out, nil
}
