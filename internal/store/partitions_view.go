package store

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// What GET /v1/partitions and the partition gauges read: who holds each partition now.
// They only read, on any replica; the elections that write these rows are internal/leader's.

// PartitionHolding is one partition as its row says, with whether someone holds it now.
// Partition 0 is the coordinator's, read from scheduler_leader; 1..N-1 from
// scheduler_partitions.
type PartitionHolding struct {
	Partition int
	// LastHolder is the replica the row names: the last one elected ("" before any
	// election). Held says whether it holds the partition still.
	LastHolder string
	Held       bool
	Epoch      int64
	TermID     *uuid.UUID
	Since      *time.Time
	// RenewedAt is the holder's last renewal (nil before its first heartbeat).
	RenewedAt *time.Time
	// Handovers counts the elections that changed the holder (always 0 for partition 0,
	// whose row keeps no count).
	Handovers int64
}

// partitionHoldingsSQL reads every partition of the cluster, 0 first. A cluster without its
// row (no replica has made it yet) counts one partition, as SCHEDULER_PARTITIONS=1 does; a
// partition the cluster counts but whose row is missing reads as never held.
//
// A partition is held while its holder renews it within the lease ($1, microseconds): a
// dead or paused holder's row keeps its name until the next election, so the name alone
// would show a holder that runs nothing. Partition 0 is held while the leader lock is
// (lock_held), and, once the leader renews its row, while it renews it within the lease: a
// paused leader keeps its lock.
var partitionHoldingsSQL = `WITH ` + leaderNowCTEs + `,
cluster AS (
    SELECT coalesce((SELECT partitions FROM scheduler_cluster WHERE id = 1), 1) AS n
),
fresh AS (
    SELECT now() - $1::bigint * interval '1 microsecond' AS after
)
SELECT 0, coalesce(r.instance_id, ''),
       coalesce(r.instance_id <> '' AND h.held AND (r.renewed_at IS NULL OR r.renewed_at > f.after), false),
       coalesce(r.epoch, 0), r.term_id, r.since, r.renewed_at, 0::bigint
FROM lock_held h CROSS JOIN fresh f LEFT JOIN scheduler_leader r ON r.id = 1
UNION ALL
SELECT g.id, coalesce(p.holder, ''),
       coalesce(p.holder <> '' AND p.renewed_at > f.after, false),
       coalesce(p.epoch, 0), p.term_id, p.since, p.renewed_at, coalesce(p.handovers, 0)
FROM cluster c CROSS JOIN fresh f
CROSS JOIN LATERAL generate_series(1, c.n - 1) AS g (id)
LEFT JOIN scheduler_partitions p ON p.partition_id = g.id
ORDER BY 1`

// PartitionHoldings reads every partition of the cluster, in order, with whether its holder
// renewed it within lease.
func (q queries) PartitionHoldings(ctx context.Context, lease time.Duration) ([]PartitionHolding, error) {
	rows, err := q.q.Query(ctx, partitionHoldingsSQL, lease.Microseconds())
	if err != nil {
		return nil, fmt.Errorf("read the partitions: %w", err)
	}
	list, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (PartitionHolding, error) {
		var p PartitionHolding
		err := row.Scan(&p.Partition, &p.LastHolder, &p.Held, &p.Epoch, &p.TermID, &p.Since, &p.RenewedAt, &p.Handovers)
		return p, err
	})
	if err != nil {
		return nil, fmt.Errorf("read the partitions: %w", err)
	}
	return list, nil
}

// PartitionJobs counts the runtime jobs' definitions by partition; a partition without one
// is absent.
func (q queries) PartitionJobs(ctx context.Context) (map[int]int64, error) {
	rows, err := q.q.Query(ctx, `SELECT partition_id, count(*) FROM job_definitions GROUP BY partition_id`)
	if err != nil {
		return nil, fmt.Errorf("count the jobs by partition: %w", err)
	}
	jobs := map[int]int64{}
	var p int
	var n int64
	if _, err := pgx.ForEachRow(rows, []any{&p, &n}, func() error { jobs[p] = n; return nil }); err != nil {
		return nil, fmt.Errorf("count the jobs by partition: %w", err)
	}
	return jobs, nil
}

// PartitionGauges is what every replica exports of the partitions at each scrape
// (metrics.PartitionsRead): how many nobody holds within lease, and each partition's
// hand-overs (1..N-1; the leader row keeps no count).
func (db *DB) PartitionGauges(ctx context.Context, lease time.Duration) (unheld int, handovers map[int]int64, err error) {
	list, err := db.PartitionHoldings(ctx, lease)
	if err != nil {
		return 0, nil, err
	}
	handovers = make(map[int]int64, len(list))
	for _, p := range list {
		if !p.Held {
			unheld++
		}
		if p.Partition > 0 {
			handovers[p.Partition] = p.Handovers
		}
	}
	return unheld, handovers, nil
}
