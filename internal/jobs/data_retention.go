package jobs

import (
	"context"
	"fmt"
	"maps"
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
	// OperatorActions keeps the audit log this long (by at): an audit outlives the runs it
	// names, so "who cancelled that run last spring" still has an answer.
	OperatorActions time.Duration
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
	retentionOperatorActionsDefault   = 365 * 24 * time.Hour
	retentionBatchSizeDefault         = 5000
	retentionPauseDefault             = 50 * time.Millisecond
)

// DataRetention deletes expired idempotency keys, old finished job runs, old message
// deliveries, old abandoned leads and old operator actions, counted per table in Detail.
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
	if s.OperatorActions <= 0 {
		s.OperatorActions = retentionOperatorActionsDefault
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

// Each table's purge is a read of the next batch of expired rows after @after_id — at most
// @limit rows older than @cutoff, locked FOR UPDATE SKIP LOCKED, so that rows another
// transaction is writing are left for the next run instead of waited for — and a delete of
// exactly those rows.
const (
	expiredIdempotencyKeysSQL = `
SELECT id FROM idempotency_keys
WHERE expires_at < @cutoff AND id > @after_id
ORDER BY id LIMIT @limit
FOR UPDATE SKIP LOCKED`
	deleteIdempotencyKeysSQL = `DELETE FROM idempotency_keys WHERE id = ANY(@ids)`

	// Queued and running runs are never deleted, however old: they are the engine's live state.
	// Nor are the slot rows catch-up decides from (docs/design.md guarantee 2): each job's
	// newest slot row, however old (without it a new leader would find the job's latest slot
	// unrecorded and run it again: a yearly job's, a month after it ran), and every slot row
	// inside its job's catch-up window (@jobs, @windows). The newest-row test is one probe of
	// job_runs_slot_key per candidate.
	expiredJobRunsSQL = `
SELECT r.id
FROM job_runs r
LEFT JOIN unnest(@jobs::text[], @windows::interval[]) AS w (job, catchup) ON w.job = r.job
WHERE r.status NOT IN ('queued', 'running')
  AND coalesce(r.finished_at, r.created_at) < @cutoff AND r.id > @after_id
  AND (r.scheduled_at IS NULL OR (
        r.scheduled_at < @now::timestamptz - coalesce(w.catchup, interval '0')
        AND EXISTS (SELECT 1 FROM job_runs n WHERE n.job = r.job AND n.scheduled_at > r.scheduled_at)))
ORDER BY r.id LIMIT @limit
FOR UPDATE OF r SKIP LOCKED`
	deleteJobRunsSQL = `DELETE FROM job_runs WHERE id = ANY(@ids)`

	expiredMessageDeliveriesSQL = `
SELECT id FROM message_deliveries
WHERE created_at < @cutoff AND id > @after_id
ORDER BY id LIMIT @limit
FOR UPDATE SKIP LOCKED`
	deleteMessageDeliveriesSQL = `DELETE FROM message_deliveries WHERE id = ANY(@ids)`

	// Only abandoned leads that were never submitted: a submitted lead is a customer's record.
	expiredLeadsSQL = `
SELECT id FROM leads
WHERE submitted_at IS NULL AND abandoned_at < @cutoff AND id > @after_id
ORDER BY id LIMIT @limit
FOR UPDATE SKIP LOCKED`
	deleteLeadsSQL = `DELETE FROM leads WHERE id = ANY(@ids)`

	expiredOperatorActionsSQL = `
SELECT id FROM operator_actions
WHERE at < @cutoff AND id > @after_id
ORDER BY id LIMIT @limit
FOR UPDATE SKIP LOCKED`
	deleteOperatorActionsSQL = `DELETE FROM operator_actions WHERE id = ANY(@ids)`
)

// Run purges each table in turn. A dry run counts the rows it would delete.
func (j *DataRetention) Run(ctx context.Context, env *Env) (Stats, error) {
	var st Stats
	// Deliveries go before leads, so that purging a lead rarely has deliveries to unlink.
	var windowJobs []string
	var windows []time.Duration
	for job, w := range env.CatchUpWindows {
		windowJobs, windows = append(windowJobs, job), append(windows, w)
	}
	purges := []struct {
		table, read, delete string
		cutoff              time.Time
		args                pgx.NamedArgs
	}{
		{"idempotency_keys", expiredIdempotencyKeysSQL, deleteIdempotencyKeysSQL, env.Now, nil},
		{"job_runs", expiredJobRunsSQL, deleteJobRunsSQL, env.Now.Add(-j.s.JobRuns),
			pgx.NamedArgs{"now": env.Now, "jobs": windowJobs, "windows": windows}},
		{"message_deliveries", expiredMessageDeliveriesSQL, deleteMessageDeliveriesSQL, env.Now.Add(-j.s.MessageDeliveries), nil},
		{"leads", expiredLeadsSQL, deleteLeadsSQL, env.Now.Add(-j.s.Leads), nil},
		{"operator_actions", expiredOperatorActionsSQL, deleteOperatorActionsSQL, env.Now.Add(-j.s.OperatorActions), nil},
	}
	for _, p := range purges {
		args := pgx.NamedArgs{"cutoff": p.cutoff}
		maps.Copy(args, p.args)
		// Batches walk the primary key, so a batch never rescans the dead rows its
		// predecessors left.
		purged, err := (&Walk[int64]{
			Job:       j.Name(),
			BatchSize: j.s.BatchSize,
			Read:      p.read,
			Args:      args,
			Start:     pgx.NamedArgs{"after_id": int64(0)},
			Keyset:    func(id int64) pgx.NamedArgs { return pgx.NamedArgs{"after_id": id} },
			Scan:      pgx.RowTo[int64],
			Pause:     j.s.Pause,
			Apply: func(ctx context.Context, b *Batch[int64]) error {
				tag, err := b.Tx.Exec(ctx, p.delete, pgx.NamedArgs{"ids": b.Rows})
				b.Stats.Changed += tag.RowsAffected()
				b.Stats.Count(p.table, tag.RowsAffected())
				b.Stats.Count("batches", 1)
				return err
			},
		}).Run(ctx, env)
		st.Add(purged)
		env.Log.Info("table purged", "table", p.table, "deleted", purged.Changed, "older_than", p.cutoff,
			"dry_run", env.Params.DryRun)
		if err != nil {
			return st, fmt.Errorf("purge %s: %w", p.table, err)
		}
	}
	return st, nil
}
