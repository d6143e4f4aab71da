package store

// The purges of the scheduler's own tables by data-retention (internal/jobs), which walks
// each batch by batch: a read of the next batch of expired ids after @after_id, at most
// @limit rows older than @cutoff, locked FOR UPDATE SKIP LOCKED (rows another transaction is
// writing are left for the next run instead of waited for), then a delete of exactly those
// rows (@ids). The statements live here with the store's other SQL on these tables.

// Purge is one table's pair of statements.
type Purge struct {
	ReadExpired string
	Delete      string
}

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
	// inside its job's catch-up window (@jobs, @windows, from @now). The newest-row test is
	// one probe of job_runs_slot_key per candidate.
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
	// A run's HTTP attempts go with it; the statement's row count stays the runs'.
	deleteJobRunsSQL = `
WITH attempts AS (DELETE FROM run_attempts WHERE run_id = ANY(@ids))
DELETE FROM job_runs WHERE id = ANY(@ids)`

	expiredMessageDeliveriesSQL = `
SELECT id FROM message_deliveries
WHERE created_at < @cutoff AND id > @after_id
ORDER BY id LIMIT @limit
FOR UPDATE SKIP LOCKED`
	deleteMessageDeliveriesSQL = `DELETE FROM message_deliveries WHERE id = ANY(@ids)`

	expiredOperatorActionsSQL = `
SELECT id FROM operator_actions
WHERE at < @cutoff AND id > @after_id
ORDER BY id LIMIT @limit
FOR UPDATE SKIP LOCKED`
	deleteOperatorActionsSQL = `DELETE FROM operator_actions WHERE id = ANY(@ids)`
)

// The scheduler's tables' purges.
var (
	PurgeIdempotencyKeys   = Purge{expiredIdempotencyKeysSQL, deleteIdempotencyKeysSQL}
	PurgeJobRuns           = Purge{expiredJobRunsSQL, deleteJobRunsSQL}
	PurgeMessageDeliveries = Purge{expiredMessageDeliveriesSQL, deleteMessageDeliveriesSQL}
	PurgeOperatorActions   = Purge{expiredOperatorActionsSQL, deleteOperatorActionsSQL}
)
