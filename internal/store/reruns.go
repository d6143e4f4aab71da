package store

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Re-runs and backfills: a slot done again under its own scheduled_at, so its run carries the
// slot's Idempotency-Key (engine/callkey.go) and lands in the slot's day partition; rerun
// numbers it after the slot's other rows (migration 0018).

// ErrSlotTooOld is a slot whose day partition retention has dropped: its history is gone, and
// so is the place its re-run would be recorded in.
var ErrSlotTooOld = errors.New("the slot's day is past the run history's retention")

// queueSlotRunSQL is queueManualRunSQL for a slot: a new queued run of the slot while the
// job has fewer active runs than its bound, else its newest active run.
const queueSlotRunSQL = `
WITH active AS (
	SELECT ` + runColumns + ` FROM job_runs WHERE job = $1 AND status IN ('queued', 'running')
), queued AS (
	INSERT INTO job_runs (id, job, trigger, status, scheduled_at, rerun, reason, params, partition_id)
	SELECT job_run_id($2), $1, $3, 'queued', $2,
	       1 + coalesce((SELECT max(rerun) FROM job_runs WHERE job = $1 AND scheduled_at = $2), 0), $4, $5,
	       job_run_partition($1)
	WHERE (SELECT count(*) FROM active) < job_run_bound($1)
	RETURNING ` + runColumns + `
)
SELECT true, * FROM queued
UNION ALL
(SELECT false, * FROM active WHERE NOT EXISTS (SELECT 1 FROM queued) ORDER BY id DESC LIMIT 1)`

// QueueSlotRun queues a run of job's slot at scheduledAt with trigger (TriggerRerun or
// TriggerBackfill), unless the job has its bound of queued or running runs: then it returns
// the newest with created=false (it never replaces one). It runs under activeRunsLock, as QueueManualRun, which also makes the slot's
// next rerun number safe to take.
func (q queries) QueueSlotRun(ctx context.Context, job string, scheduledAt time.Time, trigger string, reason *string, params []byte) (run *Run, created bool, err error) {
	if params == nil {
		params = []byte(`{}`)
	}
	err = inTx(ctx, q.q, func(tx pgx.Tx) error {
		if err := lockActiveRunsOf(ctx, tx, job); err != nil {
			return err
		}
		row := tx.QueryRow(ctx, queueSlotRunSQL, job, scheduledAt, trigger, reason, params)
		var r Run
		err := row.Scan(append([]any{&created}, r.columns()...)...)
		run = &r
		return err
	})
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "23514" && strings.Contains(pgErr.Message, "no partition") {
		return nil, false, ErrSlotTooOld
	}
	if err != nil {
		return nil, false, fmt.Errorf("queue a %s run of %s's slot %s: %w", trigger, job, scheduledAt.Format(time.RFC3339), err)
	}
	return run, created, nil
}
