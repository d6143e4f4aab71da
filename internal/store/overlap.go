package store

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// Overlap (issue 33, migration 0021): how many queued or running runs a job may have at once.
// Its bound is job_run_bound(job): a runtime job's max_concurrent with "overlap": "allow",
// else 1. The writers of active runs check it under activeRunsLock and choose what to do
// (skip, wait, replace, answer with an active run); the trigger job_runs_active_bound refuses
// whatever passes it anyway.

// activeSQL is the test "the job has active runs" ($1 the job) that job_runs_active_bound
// checks against the bound; busySQL, that it has its bound of them.
const (
	activeSQL = `SELECT count(*) FROM job_runs WHERE job = $1 AND status IN ('queued', 'running')`
	busySQL   = `SELECT (` + activeSQL + `) >= job_run_bound($1)`
)

// busy reports whether job has its bound of active runs, inside tx, under activeRunsLock.
func (tx *Tx) busy(ctx context.Context, job string) (bool, error) {
	var busy bool
	if err := tx.QueryRow(ctx, busySQL, job).Scan(&busy); err != nil {
		return false, fmt.Errorf("count the active runs of %s: %w", job, err)
	}
	return busy, nil
}

// replaceEndSQL picks, and locks, the job's active runs that no goroutine runs: its queued
// runs and its callback runs whose target accepted the call (a late completion of one then
// answers 409). They end cancelled at once, announced as every end.
const replaceEndSQL = `
SELECT id, status FROM job_runs
WHERE job = $1 AND (status = 'queued' OR (status = 'running' AND callback_accepted_at IS NOT NULL))
ORDER BY id
FOR UPDATE`

// replaceAskSQL asks the leader's cancel path (engine/queue.go) to cancel the job's runs that
// a goroutine runs; each ends cancelled when it stops. Setting cancel_requested wakes it.
const replaceAskSQL = `
UPDATE job_runs SET cancel_requested = true
WHERE job = $1 AND status = 'running' AND callback_accepted_at IS NULL AND NOT cancel_requested
RETURNING id`

// replaceActive makes room for the slot at of a job with overlap replace: it ends the active
// runs nobody runs and asks for the cancel of the others, and returns the runs it ended and
// the ones whose cancel it asked for now.
func (tx *Tx) replaceActive(ctx context.Context, c Claim) (ended []Ended, asked []int64, err error) {
	rows, err := tx.Query(ctx, replaceEndSQL, c.Job)
	if err != nil {
		return nil, nil, fmt.Errorf("end the runs %s replaces: %w", c.Job, err)
	}
	reason := "cancelled: replaced by the slot " + c.ScheduledAt.UTC().Format("2006-01-02T15:04:05Z") + " (overlap replace)"
	ends, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (Finish, error) {
		f := Finish{Status: StatusCancelled, Error: &reason, Cancel: true}
		err := row.Scan(&f.RunID, &f.From)
		return f, err
	})
	if err != nil {
		return nil, nil, fmt.Errorf("end the runs %s replaces: %w", c.Job, err)
	}
	if ended, err = tx.endRuns(ctx, nil, ends); err != nil {
		return nil, nil, fmt.Errorf("end the runs %s replaces: %w", c.Job, err)
	}
	rows, err = tx.Query(ctx, replaceAskSQL, c.Job)
	if err != nil {
		return nil, nil, fmt.Errorf("cancel the runs %s replaces: %w", c.Job, err)
	}
	asked, err = pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return nil, nil, fmt.Errorf("cancel the runs %s replaces: %w", c.Job, err)
	}
	return ended, asked, nil
}
