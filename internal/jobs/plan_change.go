package jobs

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/schedulerhq/scheduler/internal/jobcontract"
)

// PlanChange applies the pending plan changes that have come due: members whose pending plan
// starts on or before today (the date of the run's clock in UTC) move to it — plan, start and
// end date — their pending fields are cleared, and one member_plan_change_history row
// (change_type APPLIED, effective_date = the pending start date, run_id) records it.
//
// Exactly once per member and effective date, even with several copies running: each member
// is try-locked before it is changed (skipped if another run holds it), the UPDATE only
// applies the exact pending change the batch read (READ COMMITTED re-checks that on the row's
// latest version, so a change another run committed since the snapshot is not applied twice),
// a member whose change for that date is already in the history is not changed again, and
// the partial unique index on (member_id, effective_date) WHERE APPLIED refuses a second
// history row whatever happens.
type PlanChange struct {
	batchSize int
}

// NewPlanChange returns the plan-change job.
func NewPlanChange() jobcontract.Job { return &PlanChange{batchSize: memberBatchSize} }

// memberBatchSize bounds the members one batch transaction reads, locks and changes. Each
// locked member holds a slot of PostgreSQL's shared lock table until the batch commits (by
// default 64 × max_connections = 6400 slots, shared with every other transaction), so this
// stays well below it even with several copies running; larger batches gain little (the
// per-batch overhead is already ~10% of the batch's UPDATE).
const memberBatchSize = 1000

func (*PlanChange) Name() string { return "plan-change" }

func (*PlanChange) Defaults() jobcontract.Defaults {
	return jobcontract.Defaults{Schedule: "0 2 * * *", Timeout: time.Hour}
}

// pendingChange is a due member's pending plan change, as the batch read it.
type pendingChange struct {
	ID        int64
	FromPlan  pgtype.Int8
	ToPlan    int64
	StartDate pgtype.Date
	EndDate   pgtype.Date
}

// duePlanChangesSQL reads the next members whose pending plan starts on or before @today, in
// keyset order along members_pending_start_idx.
const duePlanChangesSQL = `
SELECT id, membership_plan_id, pending_membership_plan_id,
       pending_membership_start_date, pending_membership_end_date
FROM members
WHERE pending_membership_plan_id IS NOT NULL
  AND pending_membership_start_date <= @today
  AND (pending_membership_start_date, id) > (@after_date, @after_id)
ORDER BY pending_membership_start_date, id
LIMIT @limit`

// applyPlanChangesSQL applies the locked members' pending changes that are still the ones
// the batch read, writes their history rows, and reports how many members it changed, how
// many history rows it wrote, and the changes per tenant.
const applyPlanChangesSQL = `
WITH locked AS (
    SELECT *
    FROM unnest(@ids::bigint[], @from_plans::bigint[], @to_plans::bigint[], @start_dates::date[], @end_dates::date[])
        AS l (id, membership_plan_id, pending_membership_plan_id, pending_membership_start_date, pending_membership_end_date)
),
applied AS (
    UPDATE members m
    SET membership_plan_id            = l.pending_membership_plan_id,
        membership_start_date         = l.pending_membership_start_date,
        membership_end_date           = l.pending_membership_end_date,
        pending_membership_plan_id    = NULL,
        pending_membership_start_date = NULL,
        pending_membership_end_date   = NULL,
        pending_membership_price      = NULL,
        updated_at                    = now()
    FROM locked l
    WHERE m.id = l.id
      -- Guard: still the very change this batch read.
      AND m.pending_membership_plan_id = l.pending_membership_plan_id
      AND m.pending_membership_start_date = l.pending_membership_start_date
      AND m.membership_plan_id IS NOT DISTINCT FROM l.membership_plan_id
      -- Guard: never a second application for the same effective date.
      AND NOT EXISTS (
          SELECT 1 FROM member_plan_change_history h
          WHERE h.member_id = m.id AND h.effective_date = l.pending_membership_start_date
            AND h.change_type = 'APPLIED')
    RETURNING m.id, m.tenant_id, l.membership_plan_id AS from_plan_id,
              l.pending_membership_plan_id AS to_plan_id, l.pending_membership_start_date AS effective_date
),
history AS (
    INSERT INTO member_plan_change_history (member_id, from_plan_id, to_plan_id, change_type, effective_date, run_id)
    SELECT id, from_plan_id, to_plan_id, 'APPLIED', effective_date, @run_id
    FROM applied
    ON CONFLICT (member_id, effective_date) WHERE change_type = 'APPLIED' DO NOTHING
    RETURNING member_id
)
SELECT (SELECT count(*) FROM applied),
       (SELECT count(*) FROM history),
       (SELECT coalesce(jsonb_object_agg(tenant_id::text, n), '{}')
        FROM (SELECT tenant_id, count(*) AS n FROM applied GROUP BY tenant_id) per_tenant)`

// Run applies every due plan change; a dry run counts them and commits nothing.
func (j *PlanChange) Run(ctx context.Context, env *jobcontract.Env) (jobcontract.Stats, error) {
	st, err := (&jobcontract.Walk[pendingChange]{
		Job:       j.Name(),
		BatchSize: j.batchSize,
		Read:      duePlanChangesSQL,
		Args:      pgx.NamedArgs{"today": utcDate(env.Now)},
		Start: pgx.NamedArgs{
			"after_date": pgtype.Date{InfinityModifier: pgtype.NegativeInfinity, Valid: true}, "after_id": int64(0),
		},
		Keyset: func(c pendingChange) pgx.NamedArgs {
			return pgx.NamedArgs{"after_date": c.StartDate, "after_id": c.ID}
		},
		Lock: func(c pendingChange) int64 { return c.ID },
		Apply: func(ctx context.Context, b *jobcontract.Batch[pendingChange]) error {
			var changed, written int64
			var perTenant map[string]int64
			err := b.Tx.QueryRow(ctx, applyPlanChangesSQL, pgx.NamedArgs{
				"ids":         jobcontract.Column(b.Rows, func(c pendingChange) int64 { return c.ID }),
				"from_plans":  jobcontract.Column(b.Rows, func(c pendingChange) pgtype.Int8 { return c.FromPlan }),
				"to_plans":    jobcontract.Column(b.Rows, func(c pendingChange) int64 { return c.ToPlan }),
				"start_dates": jobcontract.Column(b.Rows, func(c pendingChange) pgtype.Date { return c.StartDate }),
				"end_dates":   jobcontract.Column(b.Rows, func(c pendingChange) pgtype.Date { return c.EndDate }),
				"run_id":      env.RunID,
			}).Scan(&changed, &written, &perTenant)
			if err != nil {
				return err
			}
			b.Stats.Changed += changed
			// Locked but unchanged: another run changed the member between the batch's
			// read and its lock, so the guard refused a second change.
			b.CountStale(changed)
			// The unique index refused a history row the guard let through: a member
			// changed without its history row. Should never happen; counted as an error.
			if lost := changed - written; lost > 0 {
				b.Stats.Errors += lost
				b.Stats.Count("history_conflict", lost)
				env.Log.Error("history rows refused by the unique index; investigate members changed twice",
					"batch", b.N, "count", lost)
			}
			for tenant, n := range perTenant {
				b.Stats.Count("tenant:"+tenant, n)
			}
			return nil
		},
	}).Run(ctx, env)
	env.Log.Info("plan changes applied", "processed", st.Processed, "changed", st.Changed,
		"skipped_locked", st.SkippedLocked, "errors", st.Errors, "dry_run", env.Params.DryRun)
	return st, err
}

// utcDate is t's calendar date in UTC, as midnight UTC.
func utcDate(t time.Time) time.Time {
	y, m, d := t.UTC().Date()
	return time.Date(y, m, d, 0, 0, 0, 0, time.UTC)
}
