package jobs

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// RetentionSettings are data-retention's windows (rows older than these go) and pacing.
type RetentionSettings struct {
	// JobRuns keeps finished runs this long (by finished_at); queued and running runs stay.
	JobRuns time.Duration
	// MessageDeliveries keeps message records this long (by created_at).
	MessageDeliveries time.Duration
	// Leads keeps abandoned, never submitted leads this long (by abandoned_at).
	Leads time.Duration
	// BatchSize bounds the rows one delete transaction removes.
	BatchSize int
	// Pause is the wait between two batches, which leaves room to the application's writers
	// and to autovacuum.
	Pause time.Duration
}

// Data-retention defaults.
const (
	retentionJobRunsDefault           = 30 * 24 * time.Hour
	retentionMessageDeliveriesDefault = 90 * 24 * time.Hour
	retentionLeadsDefault             = 180 * 24 * time.Hour
	retentionBatchSizeDefault         = 5000
	retentionPauseDefault             = 50 * time.Millisecond
)

// DataRetention deletes expired idempotency keys, old finished job runs, old message
// deliveries and old abandoned leads, counted per table in Detail.
//
// It never holds a long lock: each batch is one short transaction deleting at most BatchSize
// rows it has locked FOR UPDATE SKIP LOCKED (rows another transaction is writing are left for
// the next run instead of waited for), batches walk the primary key (so a batch never rescans
// the dead rows its predecessors left), and a pause separates them.
type DataRetention struct {
	s RetentionSettings
}

// NewDataRetention returns the data-retention job; zero settings take the defaults.
func NewDataRetention(s RetentionSettings) Job {
	if s.JobRuns <= 0 {
		s.JobRuns = retentionJobRunsDefault
	}
	if s.MessageDeliveries <= 0 {
		s.MessageDeliveries = retentionMessageDeliveriesDefault
	}
	if s.Leads <= 0 {
		s.Leads = retentionLeadsDefault
	}
	if s.BatchSize <= 0 {
		s.BatchSize = retentionBatchSizeDefault
	}
	if s.Pause < 0 {
		s.Pause = 0
	}
	return &DataRetention{s: s}
}

func (*DataRetention) Name() string { return "data-retention" }

func (*DataRetention) Defaults() Defaults {
	return Defaults{Schedule: "0 4 * * *", Timeout: 2 * time.Hour}
}

// Each purge statement deletes the next batch of expired rows after id $2: at most $3 rows
// older than the cutoff $1, locked FOR UPDATE SKIP LOCKED; a dry run ($4) selects and counts
// the same rows and deletes none. It returns the rows counted and the last id reached.
const (
	purgeIdempotencyKeys = `
WITH doomed AS (
    SELECT id FROM idempotency_keys
    WHERE expires_at < $1 AND id > $2
    ORDER BY id LIMIT $3
    FOR UPDATE SKIP LOCKED
),
gone AS (
    DELETE FROM idempotency_keys WHERE id IN (SELECT id FROM doomed) AND NOT $4::boolean
)
SELECT count(*), coalesce(max(id), $2) FROM doomed`

	// Queued and running runs are never deleted, however old: they are the engine's live state.
	purgeJobRuns = `
WITH doomed AS (
    SELECT id FROM job_runs
    WHERE status NOT IN ('queued', 'running')
      AND coalesce(finished_at, created_at) < $1 AND id > $2
    ORDER BY id LIMIT $3
    FOR UPDATE SKIP LOCKED
),
gone AS (
    DELETE FROM job_runs WHERE id IN (SELECT id FROM doomed) AND NOT $4::boolean
)
SELECT count(*), coalesce(max(id), $2) FROM doomed`

	purgeMessageDeliveries = `
WITH doomed AS (
    SELECT id FROM message_deliveries
    WHERE created_at < $1 AND id > $2
    ORDER BY id LIMIT $3
    FOR UPDATE SKIP LOCKED
),
gone AS (
    DELETE FROM message_deliveries WHERE id IN (SELECT id FROM doomed) AND NOT $4::boolean
)
SELECT count(*), coalesce(max(id), $2) FROM doomed`

	// Only abandoned leads that were never submitted: a submitted lead is a customer's record.
	purgeLeads = `
WITH doomed AS (
    SELECT id FROM leads
    WHERE submitted_at IS NULL AND abandoned_at < $1 AND id > $2
    ORDER BY id LIMIT $3
    FOR UPDATE SKIP LOCKED
),
gone AS (
    DELETE FROM leads WHERE id IN (SELECT id FROM doomed) AND NOT $4::boolean
)
SELECT count(*), coalesce(max(id), $2) FROM doomed`
)

// Run purges each table in turn. A dry run counts the rows it would delete.
func (j *DataRetention) Run(ctx context.Context, env *Env) (Stats, error) {
	var st Stats
	// Deliveries go before leads, so that purging a lead rarely has deliveries to unlink.
	purges := []struct {
		table, stmt string
		cutoff      time.Time
	}{
		{"idempotency_keys", purgeIdempotencyKeys, env.Now},
		{"job_runs", purgeJobRuns, env.Now.Add(-j.s.JobRuns)},
		{"message_deliveries", purgeMessageDeliveries, env.Now.Add(-j.s.MessageDeliveries)},
		{"leads", purgeLeads, env.Now.Add(-j.s.Leads)},
	}
	for _, p := range purges {
		n, err := j.purge(ctx, env, &st, p.table, p.stmt, p.cutoff)
		st.Processed += n
		st.Changed += n
		st.Count(p.table, n)
		env.Log.Info("table purged", "table", p.table, "deleted", n, "older_than", p.cutoff,
			"dry_run", env.Params.DryRun)
		if err != nil {
			return st, err
		}
	}
	return st, nil
}

// purge deletes table's expired rows batch by batch and returns how many it deleted.
func (j *DataRetention) purge(ctx context.Context, env *Env, st *Stats, table, stmt string, cutoff time.Time) (int64, error) {
	var total, lastID int64
	for {
		var n int64
		err := env.Tx(ctx, func(tx pgx.Tx) error {
			return tx.QueryRow(ctx, stmt, cutoff, lastID, j.s.BatchSize, env.Params.DryRun).Scan(&n, &lastID)
		})
		if err != nil {
			return total, fmt.Errorf("purge %s after id %d: %w", table, lastID, err)
		}
		total += n
		st.Count("batches", 1)
		if n < int64(j.s.BatchSize) {
			return total, nil
		}
		if err := sleep(ctx, j.s.Pause); err != nil {
			return total, err
		}
	}
}

// sleep waits d or until ctx is done.
func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
