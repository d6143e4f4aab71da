package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// The partitions' elections (docs/design.md, "Partitions"): partitions 1..N-1 are each led
// under a session-level advisory lock of their own, all of one replica's held on a single
// dedicated connection (a PartitionSession), and a row of scheduler_partitions carrying the
// term (epoch, term id), its holder and its last renewal.

// ErrPartitionsMismatch means this replica was started with another SCHEDULER_PARTITIONS
// than the cluster was made with.
var ErrPartitionsMismatch = errors.New("SCHEDULER_PARTITIONS differs from the cluster's")

// EnsureCluster makes the cluster's partitioning on the first start: the scheduler_cluster
// row, the rows of partitions 1..partitions-1, and every runtime definition's partition_id
// re-hashed for that count (built-in jobs have no definition and are partition 0's). Replicas
// starting at once agree: the first INSERT wins and the others wait for its commit and read
// it. A replica started with another count is refused with ErrPartitionsMismatch, naming the
// procedure that changes it (SetPartitions).
func (db *DB) EnsureCluster(ctx context.Context, partitions int) error {
	const create = `INSERT INTO scheduler_cluster (id, partitions) VALUES (1, $1) ON CONFLICT (id) DO NOTHING`
	return pgx.BeginFunc(ctx, db.pool, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, create, partitions)
		if err != nil {
			return fmt.Errorf("write the cluster's partition count: %w", err)
		}
		if tag.RowsAffected() == 1 {
			return layOutPartitions(ctx, tx, partitions)
		}
		var have int
		if err := tx.QueryRow(ctx, `SELECT partitions FROM scheduler_cluster WHERE id = 1`).Scan(&have); err != nil {
			return fmt.Errorf("read the cluster's partition count: %w", err)
		}
		if have != partitions {
			return fmt.Errorf("%w: this replica has SCHEDULER_PARTITIONS=%d, the cluster was made with %d; "+
				"start it with SCHEDULER_PARTITIONS=%d, or stop every replica and run `scheduler partitions set %d` "+
				"(docs/operations.md, \"Partitions\")", ErrPartitionsMismatch, partitions, have, have, partitions)
		}
		return nil
	})
}

// layOutPartitions writes the rows of partitions 1..n-1 (dropping those of a larger count)
// and re-hashes the definitions and their queued or running runs onto n partitions.
func layOutPartitions(ctx context.Context, tx pgx.Tx, n int) error {
	const rows = `
		WITH gone AS (DELETE FROM scheduler_partitions WHERE partition_id >= $1)
		INSERT INTO scheduler_partitions (partition_id)
		SELECT generate_series(1, $1 - 1) ON CONFLICT (partition_id) DO NOTHING`
	const definitions = `
		UPDATE job_definitions SET partition_id = scheduler_partition_of(name, $1)
		WHERE partition_id IS DISTINCT FROM scheduler_partition_of(name, $1)`
	const runs = `
		UPDATE job_runs r SET partition_id = d.partition_id
		FROM job_definitions d
		WHERE r.job = d.name AND r.status IN ('queued', 'running') AND r.partition_id <> d.partition_id`
	if _, err := tx.Exec(ctx, rows, n); err != nil {
		return fmt.Errorf("lay out %d partitions: %w", n, err)
	}
	if _, err := tx.Exec(ctx, definitions, n); err != nil {
		return fmt.Errorf("re-hash the definitions onto %d partitions: %w", n, err)
	}
	if _, err := tx.Exec(ctx, runs); err != nil {
		return fmt.Errorf("move the active runs to their partitions: %w", err)
	}
	return nil
}

// ErrReplicasLive means a replica is live, so the partition count may not change now.
var ErrReplicasLive = errors.New("replicas are running")

// SetPartitions changes the cluster's partition count: the documented way to change
// SCHEDULER_PARTITIONS (docs/operations.md, "Partitions"). Every replica must be stopped,
// because a live one leads terms of the old layout: it refuses, with ErrReplicasLive, while
// any scheduler_instances row is younger than live or any partition lock is held.
func (db *DB) SetPartitions(ctx context.Context, partitions int, live time.Duration) error {
	const running = `
		SELECT coalesce(string_agg(instance_id, ', ' ORDER BY instance_id), '')
		FROM scheduler_instances WHERE last_seen_at > now() - $1::bigint * interval '1 microsecond'`
	return pgx.BeginFunc(ctx, db.pool, func(tx pgx.Tx) error {
		// Serialises with EnsureCluster and a concurrent SetPartitions.
		if _, err := tx.Exec(ctx, `LOCK TABLE scheduler_cluster IN EXCLUSIVE MODE`); err != nil {
			return err
		}
		var names string
		if err := tx.QueryRow(ctx, running, live.Microseconds()).Scan(&names); err != nil {
			return fmt.Errorf("look for live replicas: %w", err)
		}
		if names != "" {
			return fmt.Errorf("%w: %s; stop every replica (their rows go stale after %s), then run this again",
				ErrReplicasLive, names, live)
		}
		const upsert = `
			INSERT INTO scheduler_cluster (id, partitions) VALUES (1, $1)
			ON CONFLICT (id) DO UPDATE SET partitions = EXCLUDED.partitions`
		if _, err := tx.Exec(ctx, upsert, partitions); err != nil {
			return fmt.Errorf("write the cluster's partition count: %w", err)
		}
		return layOutPartitions(ctx, tx, partitions)
	})
}

// partitionLockKey is the key of partition $1's lock: distinct from the leader lock's (seed
// 0 of another name) and computed by the server, so every replica and version agrees on it.
const partitionLockKey = `pg_catalog.hashtextextended('scheduler-partition', %s)`

// advisoryOnThisDB is the condition on a pg_locks row l that it is a 64-bit advisory lock
// (objsubid 1) of this database, and advisoryKeyOf its key, from the high and low halves.
const (
	advisoryOnThisDB = `l.locktype = 'advisory' AND l.objsubid = 1
  AND l.database = (SELECT oid FROM pg_catalog.pg_database WHERE datname = pg_catalog.current_database())`
	advisoryKeyOf = `((l.classid::int8 << 32) | l.objid::int8)`
)

// ControlDrain is the kind of a drain's scheduler_control row.
const ControlDrain = "drain"

// RequestDrain asks replica instanceID to release its partitions, step down as coordinator
// if it is, and take nothing until it restarts: a row of scheduler_control naming it. Run it
// inside Atomically with the request's audit row. ok is false when no replica of that id has
// a row in scheduler_instances (nothing to drain). The replica reads the row at its next
// heartbeat (Drained), so no NOTIFY is needed: a drain is not urgent to the millisecond.
func (q queries) RequestDrain(ctx context.Context, instanceID string, req ControlRequest) (ok bool, err error) {
	const insert = `
		INSERT INTO scheduler_control (kind, epoch, instance_id, token_kind, reason, request_id)
		SELECT $1, 0, i.instance_id, $3, $4, $5 FROM scheduler_instances i WHERE i.instance_id = $2`
	tag, err := q.q.Exec(ctx, insert, ControlDrain, instanceID, req.TokenKind, req.Reason, req.RequestID)
	if err != nil {
		return false, fmt.Errorf("write the drain request: %w", err)
	}
	return tag.RowsAffected() == 1, nil
}

// Drained reports whether replica instanceID was drained since it started (its
// scheduler_instances row's started_at): a drain lasts until the replica restarts.
func (q queries) Drained(ctx context.Context, instanceID string) (bool, error) {
	var drained bool
	err := q.q.QueryRow(ctx, `
		SELECT EXISTS (SELECT 1 FROM scheduler_control c JOIN scheduler_instances i ON i.instance_id = c.instance_id
		               WHERE c.kind = $1 AND c.instance_id = $2 AND c.created_at >= i.started_at)`,
		ControlDrain, instanceID).Scan(&drained)
	if err != nil {
		return false, fmt.Errorf("read the drain requests: %w", err)
	}
	return drained, nil
}
