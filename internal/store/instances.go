package store

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// Instance is one replica's row in scheduler_instances, refreshed by its heartbeat.
// Its JSON shape is the API's (api/cluster.go), not this struct's.
type Instance struct {
	InstanceID string
	Host       string
	Version    string
	HTTPAddr   string
	StartedAt  time.Time
	LastSeenAt time.Time
	IsLeader   bool
}

// HeartbeatInstance upserts in's row with last_seen_at = the database's now().
func (q queries) HeartbeatInstance(ctx context.Context, in Instance) (dbClock time.Time, err error) {
	const upsert = `
		INSERT INTO scheduler_instances (instance_id, host, version, http_addr, started_at, last_seen_at, is_leader)
		VALUES ($1, $2, $3, $4, $5, now(), $6)
		ON CONFLICT (instance_id) DO UPDATE
		SET host = EXCLUDED.host, version = EXCLUDED.version, http_addr = EXCLUDED.http_addr,
		    started_at = EXCLUDED.started_at, last_seen_at = now(), is_leader = EXCLUDED.is_leader
		RETURNING clock_timestamp()`
	err = q.q.QueryRow(ctx, upsert, in.InstanceID, in.Host, in.Version, in.HTTPAddr, in.StartedAt, in.IsLeader).Scan(&dbClock)
	if err != nil {
		return time.Time{}, fmt.Errorf("heartbeat instance %s: %w", in.InstanceID, err)
	}
	return dbClock, nil
}

// DeleteInstance removes a replica's row when it shuts down cleanly.
func (q queries) DeleteInstance(ctx context.Context, instanceID string) error {
	_, err := q.q.Exec(ctx, `DELETE FROM scheduler_instances WHERE instance_id = $1`, instanceID)
	return err
}

// DeleteStaleInstances removes the rows of replicas not seen for longer than olderThan
// (by the database clock) and returns how many went.
func (q queries) DeleteStaleInstances(ctx context.Context, olderThan time.Duration) (int64, error) {
	tag, err := q.q.Exec(ctx,
		`DELETE FROM scheduler_instances WHERE last_seen_at < now() - $1::bigint * interval '1 microsecond'`,
		olderThan.Microseconds())
	if err != nil {
		return 0, fmt.Errorf("delete stale instances: %w", err)
	}
	return tag.RowsAffected(), nil
}

// Instances lists the replicas, for GET /v1/instances, oldest first. IsLeader is the leader
// row's word while its lock is held, not what each replica last reported: a leader that
// crashed reports itself leader until its row goes stale, beside the one elected after it.
func (q queries) Instances(ctx context.Context) ([]Instance, error) {
	rows, err := q.q.Query(ctx, `WITH `+leaderNowCTEs+`
		SELECT i.instance_id, i.host, i.version, i.http_addr, i.started_at, i.last_seen_at,
		       coalesce(i.instance_id = l.instance_id AND h.held, false)
		FROM scheduler_instances i LEFT JOIN leader l ON true CROSS JOIN lock_held h
		ORDER BY i.started_at, i.instance_id`)
	if err != nil {
		return nil, fmt.Errorf("list instances: %w", err)
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (Instance, error) {
		var in Instance
		err := row.Scan(&in.InstanceID, &in.Host, &in.Version, &in.HTTPAddr, &in.StartedAt, &in.LastSeenAt, &in.IsLeader)
		return in, err
	})
}
