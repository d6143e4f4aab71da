package jobs

import (
	"context"
	"fmt"
	"maps"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/schedulerhq/scheduler/internal/store"
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

// The leads purge: a read of the next batch of expired rows after @after_id (at most @limit
// rows older than @cutoff, locked FOR UPDATE SKIP LOCKED, so that rows another transaction
// is writing are left for the next run instead of waited for) and a delete of exactly those
// rows. The scheduler's own tables are purged the same way with the store's statements
// (store.Purge*).
const (
	// Only abandoned leads that were never submitted: a submitted lead is a customer's record.
	expiredLeadsSQL = `
SELECT id FROM leads
WHERE submitted_at IS NULL AND abandoned_at < @cutoff AND id > @after_id
ORDER BY id LIMIT @limit
FOR UPDATE SKIP LOCKED`
	deleteLeadsSQL = `DELETE FROM leads WHERE id = ANY(@ids)`
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
		{"idempotency_keys", store.PurgeIdempotencyKeys.ReadExpired, store.PurgeIdempotencyKeys.Delete, env.Now, nil},
		{"job_runs", store.PurgeJobRuns.ReadExpired, store.PurgeJobRuns.Delete, env.Now.Add(-j.s.JobRuns),
			pgx.NamedArgs{"now": env.Now, "jobs": windowJobs, "windows": windows}},
		{"message_deliveries", store.PurgeMessageDeliveries.ReadExpired, store.PurgeMessageDeliveries.Delete,
			env.Now.Add(-j.s.MessageDeliveries), nil},
		{"leads", expiredLeadsSQL, deleteLeadsSQL, env.Now.Add(-j.s.Leads), nil},
		{"operator_actions", store.PurgeOperatorActions.ReadExpired, store.PurgeOperatorActions.Delete,
			env.Now.Add(-j.s.OperatorActions), nil},
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
