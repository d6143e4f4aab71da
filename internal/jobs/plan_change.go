package jobs

import (
	"context"
	"time"
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
func NewPlanChange() Job { return &PlanChange{batchSize: memberBatchSize} }

// memberBatchSize bounds the members one batch transaction reads, locks and changes. Each
// locked member holds a slot of PostgreSQL's shared lock table until the batch commits (by
// default 64 × max_connections = 6400 slots, shared with every other transaction), so this
// stays well below it even with several copies running; larger batches gain little (the
// per-batch overhead is already ~10% of the batch's UPDATE).
const memberBatchSize = 1000

func (*PlanChange) Name() string { return "plan-change" }

func (*PlanChange) Defaults() Defaults {
	return Defaults{Schedule: "0 2 * * *", Timeout: time.Hour}
}

// planChangeBatch is one batch, in one statement: read the next due members in keyset order,
// try-lock them, apply the locked ones whose pending change is still the one read, write
// their history rows, and report the counts and the keyset position reached.
const planChangeBatch = `
WITH batch AS MATERIALIZED (
    SELECT id, membership_plan_id, pending_membership_plan_id,
           pending_membership_start_date, pending_membership_end_date
    FROM members
    WHERE pending_membership_plan_id IS NOT NULL
      AND pending_membership_start_date <= $2
      AND (pending_membership_start_date, id) > ($3, $4)
    ORDER BY pending_membership_start_date, id
    LIMIT $5
),
locked AS MATERIALIZED (
    SELECT * FROM batch
    WHERE pg_try_advisory_xact_lock(hashtextextended($1::text || ':' || id::text, 0))
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
    SELECT id, from_plan_id, to_plan_id, 'APPLIED', effective_date, $6
    FROM applied
    ON CONFLICT (member_id, effective_date) WHERE change_type = 'APPLIED' DO NOTHING
    RETURNING member_id
)
SELECT (SELECT count(*) FROM batch),
       (SELECT count(*) FROM locked),
       (SELECT count(*) FROM applied),
       (SELECT count(*) FROM history),
       (SELECT coalesce(jsonb_object_agg(tenant_id::text, n), '{}')
        FROM (SELECT tenant_id, count(*) AS n FROM applied GROUP BY tenant_id) per_tenant),
       coalesce((SELECT max(pending_membership_start_date) FROM batch), $3),
       coalesce((SELECT max(id) FROM batch
                 WHERE pending_membership_start_date = (SELECT max(pending_membership_start_date) FROM batch)), $4)`

// Run applies every due plan change; a dry run counts them and commits nothing.
func (j *PlanChange) Run(ctx context.Context, env *Env) (Stats, error) {
	st, err := walkMembers(ctx, env, j.Name(), planChangeBatch, j.batchSize, utcDate(env.Now), env.RunID)
	env.Log.Info("plan changes applied", "processed", st.Processed, "changed", st.Changed,
		"skipped_locked", st.SkippedLocked, "errors", st.Errors, "dry_run", env.Params.DryRun)
	return st, err
}
