package jobs

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/schedulerhq/scheduler/internal/jobcontract"
)

// StatusSync deactivates expired memberships: ACTIVE members whose membership_end_date is
// before today (the date of the run's clock in UTC) become INACTIVE, counted per tenant
// (Detail "tenant:<id>").
//
// Safe with several copies running: each member is try-locked before it is changed (skipped
// if another run holds it) and the UPDATE re-checks status and end date, so a member is
// deactivated by one run only and one renewed meanwhile is left alone. Every member due when
// the run starts and not renewed meanwhile is deactivated by this run or the one holding it.
type StatusSync struct {
	batchSize int
}

// NewStatusSync returns the status-sync job.
func NewStatusSync() jobcontract.Job { return &StatusSync{batchSize: memberBatchSize} }

func (*StatusSync) Name() string { return "status-sync" }

func (*StatusSync) Defaults() jobcontract.Defaults {
	return jobcontract.Defaults{Schedule: "0 3 * * *", Timeout: time.Hour}
}

// expiredMembersSQL reads the next expired ACTIVE members in id order, along
// members_active_id_idx. The walk goes in id order, not end-date order, on purpose: ids
// follow the table's physical order, so a batch's members share heap pages and each page is
// rewritten once per run, as a single UPDATE would; walked by end date, a batch's members are
// scattered over the whole table and every page is dirtied (and logged) again batch after
// batch, which cost more than the rest of the job together.
const expiredMembersSQL = `
SELECT id
FROM members
WHERE status = 'ACTIVE'
  AND membership_end_date < @today
  AND id > @after_id
ORDER BY id
LIMIT @limit`

// deactivateSQL deactivates the locked members still ACTIVE and expired (not renewed since
// the batch read them), and counts them per tenant.
const deactivateSQL = `
WITH deactivated AS (
    UPDATE members
    SET status = 'INACTIVE', updated_at = now()
    WHERE id = ANY(@ids)
      AND status = 'ACTIVE'
      AND membership_end_date < @today
    RETURNING tenant_id
)
SELECT tenant_id, count(*) FROM deactivated GROUP BY tenant_id`

// Run deactivates every expired membership; a dry run counts them and commits nothing.
func (j *StatusSync) Run(ctx context.Context, env *jobcontract.Env) (jobcontract.Stats, error) {
	today := utcDate(env.Now)
	st, err := (&jobcontract.Walk[int64]{
		Job:       j.Name(),
		BatchSize: j.batchSize,
		Read:      expiredMembersSQL,
		Args:      pgx.NamedArgs{"today": today},
		Start:     pgx.NamedArgs{"after_id": int64(0)},
		Keyset:    func(id int64) pgx.NamedArgs { return pgx.NamedArgs{"after_id": id} },
		Scan:      pgx.RowTo[int64],
		Lock:      func(id int64) int64 { return id },
		Apply: func(ctx context.Context, b *jobcontract.Batch[int64]) error {
			rows, err := b.Tx.Query(ctx, deactivateSQL, pgx.NamedArgs{"ids": b.Rows, "today": today})
			if err != nil {
				return err
			}
			var tenant, n int64
			_, err = pgx.ForEachRow(rows, []any{&tenant, &n}, func() error {
				b.Stats.Changed += n
				b.Stats.Count(fmt.Sprint("tenant:", tenant), n)
				return nil
			})
			// Locked but unchanged: renewed, or deactivated by another run, between the
			// batch's read and its lock.
			if err == nil {
				b.CountStale(b.Stats.Changed)
			}
			return err
		},
	}).Run(ctx, env)
	env.Log.Info("expired memberships deactivated", "processed", st.Processed, "changed", st.Changed,
		"skipped_locked", st.SkippedLocked, "dry_run", env.Params.DryRun)
	return st, err
}
