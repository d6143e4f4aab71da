package jobs

import (
	"context"
	"fmt"
	"maps"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/schedulerhq/scheduler/internal/jobcontract"
	"github.com/schedulerhq/scheduler/internal/store"
)

// RetentionSettings are data-retention's windows (rows older than these go) and pacing.
type RetentionSettings struct {
	// JobRuns keeps the runs of a day this long after the day ends (by slot, else by
	// creation); a day with a queued or running run stays, and so do each job's newest run
	// and newest slot.
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

// RunDays is what data-retention needs of the scheduler to drop the old days of job_runs,
// given to its constructor by whoever builds it (the replica, from the engine and the store).
type RunDays struct {
	// CatchUpWindows returns every job's catch-up window, the runtime jobs' included, as they
	// are when the run asks (engine.Engine.CatchUpWindows): no day inside the longest is
	// dropped, for catch-up decides from its rows.
	CatchUpWindows func() map[string]time.Duration
	// Drop drops the day partitions of job_runs that ended before a time, outside the fence:
	// DETACH ... CONCURRENTLY cannot run in a transaction (store.DB.DropRunDays).
	Drop func(ctx context.Context, before time.Time, dryRun bool) (store.DroppedDays, error)
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

// DataRetention drops the old days of job_runs (store.DB.DropRunDays) and deletes expired
// idempotency keys, old message deliveries, old abandoned leads and old operator actions,
// counted per table in Detail.
//
// It never holds a long lock: a day of job_runs is detached concurrently and dropped whole;
// on the other tables each batch is one short transaction deleting at most BatchSize
// rows it has locked FOR UPDATE SKIP LOCKED (rows another transaction is writing are left for
// the next run instead of waited for), batches walk the primary key (so a batch never rescans
// the dead rows its predecessors left), and a pause separates them.
type DataRetention struct {
	s    RetentionSettings
	days RunDays
}

// NewDataRetention returns the data-retention job; zero settings take the defaults. A run
// fails without both of days' functions.
func NewDataRetention(s RetentionSettings, days RunDays) jobcontract.Job {
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
	return &DataRetention{s: s, days: days}
}

func (*DataRetention) Name() string { return "data-retention" }

func (*DataRetention) Defaults() jobcontract.Defaults {
	return jobcontract.Defaults{Schedule: "0 4 * * *", Timeout: 2 * time.Hour}
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
func (j *DataRetention) Run(ctx context.Context, env *jobcontract.Env) (jobcontract.Stats, error) {
	var st jobcontract.Stats
	dropped, err := j.dropRunDays(ctx, env)
	st.Add(dropped)
	if err != nil {
		return st, err
	}
	// Deliveries go before leads, so that purging a lead rarely has deliveries to unlink.
	purges := []struct {
		table, read, delete string
		cutoff              time.Time
		args                pgx.NamedArgs
	}{
		{"idempotency_keys", store.PurgeIdempotencyKeys.ReadExpired, store.PurgeIdempotencyKeys.Delete, env.Now, nil},
		{"message_deliveries", store.PurgeMessageDeliveries.ReadExpired, store.PurgeMessageDeliveries.Delete,
			env.Now.Add(-j.s.MessageDeliveries), nil},
		{"leads", expiredLeadsSQL, deleteLeadsSQL, env.Now.Add(-j.s.Leads), nil},
		{"operator_actions", store.PurgeOperatorActions.ReadExpired, store.PurgeOperatorActions.Delete,
			env.Now.Add(-j.s.OperatorActions), nil},
		{"scheduler_notifications", store.PurgeNotifications.ReadExpired, store.PurgeNotifications.Delete,
			env.Now.Add(-j.s.JobRuns), nil},
		{"scheduler_notification_deliveries", store.PurgeNotificationDeliveries.ReadExpired, store.PurgeNotificationDeliveries.Delete,
			env.Now.Add(-j.s.JobRuns), nil},
	}
	for _, p := range purges {
		args := pgx.NamedArgs{"cutoff": p.cutoff}
		maps.Copy(args, p.args)
		// Batches walk the primary key, so a batch never rescans the dead rows its
		// predecessors left.
		purged, err := (&jobcontract.Walk[int64]{
			Job:       j.Name(),
			BatchSize: j.s.BatchSize,
			Read:      p.read,
			Args:      args,
			Start:     pgx.NamedArgs{"after_id": int64(0)},
			Keyset:    func(id int64) pgx.NamedArgs { return pgx.NamedArgs{"after_id": id} },
			Scan:      pgx.RowTo[int64],
			Pause:     j.s.Pause,
			Apply: func(ctx context.Context, b *jobcontract.Batch[int64]) error {
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

// dropRunDays drops the days of job_runs (and run_attempts) past the window, whole: a day
// goes once it ended JobRuns ago, and once it ended longer ago than every job's catch-up
// window (catch-up reads the slot rows inside it). Detail counts the days dropped
// (job_runs_days), their runs as PostgreSQL estimates them (job_runs), the runs moved to
// job_runs_kept and those pruned from it, and the days kept for an active run.
func (j *DataRetention) dropRunDays(ctx context.Context, env *jobcontract.Env) (jobcontract.Stats, error) {
	var st jobcontract.Stats
	if j.days.CatchUpWindows == nil || j.days.Drop == nil {
		return st, fmt.Errorf("purge job_runs: data-retention was built without its RunDays")
	}
	before := env.Now.Add(-j.s.JobRuns)
	for _, w := range j.days.CatchUpWindows() {
		if b := env.Now.Add(-w); b.Before(before) {
			before = b
		}
	}
	out, err := j.days.Drop(ctx, before, env.Params.DryRun)
	for _, d := range out.Dropped {
		st.Changed += d.Rows
		st.Count("job_runs", d.Rows)
		st.Count("job_runs_days", 1)
		env.Log.Info("day of job_runs dropped", "partition", d.Table, "day_end", d.End, "rows", d.Rows,
			"dry_run", env.Params.DryRun)
	}
	for _, d := range out.Kept {
		st.Count("job_runs_days_active", 1)
		env.Log.Warn("day of job_runs past the window kept: a run of it is still queued or running",
			"partition", d.Table, "day_end", d.End)
	}
	st.Count("job_runs_kept", out.KeptRuns)
	st.Count("job_runs_kept_pruned", out.Pruned)
	if err != nil {
		return st, fmt.Errorf("purge job_runs: %w", err)
	}
	return st, nil
}
