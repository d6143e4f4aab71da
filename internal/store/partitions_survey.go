package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// PartitionSurvey is what a replica reads, once a heartbeat, to decide which partitions to
// take, release or take over (leader.Partitions).
type PartitionSurvey struct {
	// Live are the replicas the partitions are shared among: a fresh scheduler_instances row
	// (younger than the lease) not drained since it started, oldest first.
	Live []string
	// Coordinator is the replica holding the leader lock (partition 0), "" when none does.
	Coordinator string
	// Holders maps each partition whose lock is held and whose renewal is fresh to its holder.
	Holders map[int]string
	// Free are the partitions whose lock nobody holds.
	Free []int
	// Stale maps each partition whose lock is held by an idle backend that does not renew it
	// (its renewal is older than the lease, or it was released and never unlocked) to that
	// backend's pid: a paused or hung replica's, or another login's. A caller ends the backend
	// only when two surveys in a row find it, against the instant between a survey's snapshot
	// of the rows and its read of the locks.
	Stale map[int]uint32
	// Lapsed are the replicas named holder by a partition whose renewal is older than the
	// lease without a release (a release clears it): dead, paused or hung, whether or not
	// their locks are gone yet. A replica that just took a lock stamped it in the same
	// statement, so it is never among them.
	Lapsed []string
}

// surveySQL reads every partition's lock and row. A holder's backend running a statement
// (taking the lock, or waiting inside an election's bumpTerm) is not paused.
var surveySQL = `
WITH held AS (
    SELECT ` + advisoryKeyOf + ` AS key, l.pid
    FROM pg_catalog.pg_locks l WHERE ` + advisoryOnThisDB + ` AND l.granted
)
SELECT p.partition_id, coalesce(p.holder, ''), h.pid,
       coalesce(p.renewed_at > now() - $1::bigint * interval '1 microsecond', false),
       h.pid IS NOT NULL AND coalesce(p.renewed_at <= now() - $1::bigint * interval '1 microsecond', true)
         AND a.state IS DISTINCT FROM 'active'
FROM scheduler_partitions p
LEFT JOIN held h ON h.key = ` + fmt.Sprintf(partitionLockKey, "p.partition_id") + `
LEFT JOIN pg_catalog.pg_stat_activity a ON a.pid = h.pid
ORDER BY p.partition_id`

// liveSQL lists the replicas that share the partitions; a drain lasts until the replica
// restarts (a new started_at).
const liveSQL = `
SELECT i.instance_id FROM scheduler_instances i
WHERE i.last_seen_at > now() - $1::bigint * interval '1 microsecond'
  AND NOT EXISTS (SELECT 1 FROM scheduler_control c
                  WHERE c.kind = 'drain' AND c.instance_id = i.instance_id AND c.created_at >= i.started_at)
ORDER BY i.started_at, i.instance_id`

// SurveyPartitions reads the partitions' state for a lease of lease.
func (q queries) SurveyPartitions(ctx context.Context, lease time.Duration) (PartitionSurvey, error) {
	s := PartitionSurvey{Holders: map[int]string{}, Stale: map[int]uint32{}}
	rows, err := q.q.Query(ctx, surveySQL, lease.Microseconds())
	if err != nil {
		return s, fmt.Errorf("survey the partitions: %w", err)
	}
	for rows.Next() {
		var p int
		var holder string
		var pid *uint32
		var fresh, stale bool
		if err := rows.Scan(&p, &holder, &pid, &fresh, &stale); err != nil {
			rows.Close()
			return s, fmt.Errorf("survey the partitions: %w", err)
		}
		switch {
		case pid == nil:
			s.Free = append(s.Free, p)
		case stale:
			s.Stale[p] = *pid
		case fresh:
			s.Holders[p] = holder
		}
	}
	if err := rows.Err(); err != nil {
		return s, fmt.Errorf("survey the partitions: %w", err)
	}
	rows, err = q.q.Query(ctx, `SELECT DISTINCT holder FROM scheduler_partitions
		WHERE holder IS NOT NULL AND renewed_at <= now() - $1::bigint * interval '1 microsecond' ORDER BY holder`,
		lease.Microseconds())
	if err != nil {
		return s, fmt.Errorf("list the lapsed holders: %w", err)
	}
	if s.Lapsed, err = pgx.CollectRows(rows, pgx.RowTo[string]); err != nil {
		return s, fmt.Errorf("list the lapsed holders: %w", err)
	}
	rows, err = q.q.Query(ctx, liveSQL, lease.Microseconds())
	if err != nil {
		return s, fmt.Errorf("list the live replicas: %w", err)
	}
	if s.Live, err = pgx.CollectRows(rows, pgx.RowTo[string]); err != nil {
		return s, fmt.Errorf("list the live replicas: %w", err)
	}
	err = q.q.QueryRow(ctx, `WITH `+leaderNowCTEs+`
		SELECT CASE WHEN lock_held.held THEN coalesce(leader.instance_id, '') ELSE '' END FROM leader, lock_held`).Scan(&s.Coordinator)
	if err != nil {
		return s, fmt.Errorf("read the coordinator: %w", err)
	}
	return s, nil
}

// EndStalePartitionHolder terminates backend pid if it still holds partition p's lock
// without renewing it (as SurveyPartitions found): the lock session of a paused or hung
// replica, found by the lock it holds, never by a name. The caller saw it stale in two
// surveys a heartbeat apart, so a replica that has just taken the lock and not yet stamped
// its renewal is never mistaken for it.
func (q queries) EndStalePartitionHolder(ctx context.Context, p int, pid uint32, lease time.Duration) ([]Backend, error) {
	query := `
		SELECT ` + backendColumns + `
		FROM pg_catalog.pg_locks l
		JOIN pg_catalog.pg_stat_activity a ON a.pid = l.pid
		JOIN scheduler_partitions p ON p.partition_id = $1
		WHERE ` + advisoryOnThisDB + ` AND ` + advisoryKeyOf + ` = ` + fmt.Sprintf(partitionLockKey, "$1::bigint") + `
		  AND l.granted AND l.pid = $2
		  AND coalesce(p.renewed_at <= now() - $3::bigint * interval '1 microsecond', true)`
	rows, err := q.q.Query(ctx, query, p, int32(pid), lease.Microseconds())
	if err != nil {
		return nil, fmt.Errorf("find partition %d's stale holder: %w", p, err)
	}
	found, err := scanBackends(rows)
	if err != nil || len(found) == 0 {
		return nil, err
	}
	return terminateBackends(ctx, q.q, found)
}

// StaleLeader returns the pid of the backend holding the leader lock when the leader row's
// renewal is older than lease (the coordinator is paused or hung), or 0. A term that never
// renewed (renewed_at before its since: elected by a binary from before renewals) is left
// alone rather than taken for paused.
func (q queries) StaleLeader(ctx context.Context, lease time.Duration) (uint32, error) {
	var pid *int32
	err := q.q.QueryRow(ctx, `
		SELECT l.pid FROM pg_catalog.pg_locks l
		JOIN pg_catalog.pg_stat_activity a ON a.pid = l.pid
		JOIN scheduler_leader r ON r.id = 1
		WHERE `+isLeaderLock+` AND l.granted
		  AND r.renewed_at >= r.since AND r.renewed_at <= now() - $1::bigint * interval '1 microsecond'
		  AND a.wait_event_type IS DISTINCT FROM 'Lock'`, lease.Microseconds()).Scan(&pid)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("look for a paused leader: %w", err)
	}
	return uint32(*pid), nil // pg_locks.pid is never NULL for a granted lock
}

// EndStaleLeader terminates backend pid if it still holds the leader lock with a renewal
// older than lease: a paused leader, whose waiting followers then take over.
func (q queries) EndStaleLeader(ctx context.Context, pid uint32, lease time.Duration) ([]Backend, error) {
	rows, err := q.q.Query(ctx, `
		SELECT `+backendColumns+`
		FROM pg_catalog.pg_locks l
		JOIN pg_catalog.pg_stat_activity a ON a.pid = l.pid
		JOIN scheduler_leader r ON r.id = 1
		WHERE `+isLeaderLock+` AND l.granted AND l.pid = $1
		  AND r.renewed_at >= r.since AND r.renewed_at <= now() - $2::bigint * interval '1 microsecond'`, int32(pid), lease.Microseconds())
	if err != nil {
		return nil, fmt.Errorf("find the paused leader's lock backend: %w", err)
	}
	found, err := scanBackends(rows)
	if err != nil || len(found) == 0 {
		return nil, err
	}
	return terminateBackends(ctx, q.q, found)
}
