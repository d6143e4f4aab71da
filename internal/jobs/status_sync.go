package jobs

import (
	"context"
	"time"
)

// StatusSync deactivates expired memberships: ACTIVE members whose membership_end_date is
// before today (the date of the run's clock in UTC) become INACTIVE, counted per tenant
// (Detail "tenant:<id>").
//
// Safe with several copies running: each member is try-locked before it is changed (skipped
// if another run holds it) and the UPDATE re-checks status and end date, so a member is
// deactivated by one run only and one renewed meanwhile is left alone.
type StatusSync struct {
	batchSize int
}

// NewStatusSync returns the status-sync job.
func NewStatusSync() Job { return &StatusSync{batchSize: memberBatchSize} }

func (*StatusSync) Name() string { return "status-sync" }

func (*StatusSync) Defaults() Defaults {
	return Defaults{Schedule: "0 3 * * *", Timeout: time.Hour}
}

// statusSyncBatch is one batch, in one statement: read the next expired ACTIVE members in
// keyset order, try-lock them, deactivate the locked ones still ACTIVE and expired, and
// report the counts and the keyset position reached.
const statusSyncBatch = `
WITH batch AS MATERIALIZED (
    SELECT id, membership_end_date
    FROM members
    WHERE status = 'ACTIVE'
      AND membership_end_date < $2
      AND (membership_end_date, id) > ($3, $4)
    ORDER BY membership_end_date, id
    LIMIT $5
),
locked AS MATERIALIZED (
    SELECT * FROM batch
    WHERE pg_try_advisory_xact_lock(hashtextextended($1::text || ':' || id::text, 0))
),
deactivated AS (
    UPDATE members m
    SET status = 'INACTIVE', updated_at = now()
    FROM locked l
    WHERE m.id = l.id
      -- Guard: still ACTIVE and still expired (not renewed since the batch read it).
      AND m.status = 'ACTIVE'
      AND m.membership_end_date < $2
    RETURNING m.tenant_id
)
SELECT (SELECT count(*) FROM batch),
       (SELECT count(*) FROM locked),
       (SELECT count(*) FROM deactivated),
       (SELECT count(*) FROM deactivated),
       (SELECT coalesce(jsonb_object_agg(tenant_id::text, n), '{}')
        FROM (SELECT tenant_id, count(*) AS n FROM deactivated GROUP BY tenant_id) per_tenant),
       coalesce((SELECT max(membership_end_date) FROM batch), $3),
       coalesce((SELECT max(id) FROM batch
                 WHERE membership_end_date = (SELECT max(membership_end_date) FROM batch)), $4)`

// Run deactivates every expired membership; a dry run counts them and commits nothing.
func (j *StatusSync) Run(ctx context.Context, env *Env) (Stats, error) {
	st, err := walkMembers(ctx, env, j.Name(), statusSyncBatch, j.batchSize, utcDate(env.Now))
	env.Log.Info("expired memberships deactivated", "processed", st.Processed, "changed", st.Changed,
		"skipped_locked", st.SkippedLocked, "dry_run", env.Params.DryRun)
	return st, err
}
