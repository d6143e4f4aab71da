package store

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// run_attempts: each attempt of a runtime HTTP job's call, shown with its run.

// Attempt is one call attempt.
type Attempt struct {
	Number     int
	StartedAt  time.Time
	Duration   time.Duration
	StatusCode *int    // nil when no answer came
	Body       *string // the first 4 KiB of the answer's body
	Error      *string
}

// RecordAttempt records one attempt of run's call, inside the leader's fenced transaction: a
// deposed leader's attempt is not recorded (the next leader's recovery calls again, with the
// same Idempotency-Key).
func (tx *Tx) RecordAttempt(ctx context.Context, runID int64, a Attempt) error {
	const insert = `
		INSERT INTO run_attempts (run_id, attempt, started_at, duration_ms, status_code, body, error)
		VALUES ($1, $2, $3, $4, $5, $6, $7)
		ON CONFLICT (run_id, attempt) DO NOTHING`
	_, err := tx.Exec(ctx, insert, runID, a.Number, a.StartedAt, a.Duration.Milliseconds(), a.StatusCode, a.Body, a.Error)
	if err != nil {
		return fmt.Errorf("record attempt %d of run %d: %w", a.Number, runID, err)
	}
	return nil
}

// Attempts returns a run's attempts, in order.
func (q queries) Attempts(ctx context.Context, runID int64) ([]Attempt, error) {
	rows, err := q.q.Query(ctx, `
		SELECT attempt, started_at, duration_ms, status_code, body, error
		FROM run_attempts WHERE run_id = $1 ORDER BY attempt`, runID)
	if err != nil {
		return nil, fmt.Errorf("read attempts of run %d: %w", runID, err)
	}
	list, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (Attempt, error) {
		var a Attempt
		var ms int64
		err := row.Scan(&a.Number, &a.StartedAt, &ms, &a.StatusCode, &a.Body, &a.Error)
		a.Duration = time.Duration(ms) * time.Millisecond
		return a, err
	})
	if err != nil {
		return nil, fmt.Errorf("read attempts of run %d: %w", runID, err)
	}
	return list, nil
}

// CallKeySource is what a runtime job's Idempotency-Key is derived from: the deployment,
// and the run a recovery chain started from, with its job and slot (nil for a manual run).
type CallKeySource struct {
	Deployment  uuid.UUID
	RootRunID   int64
	Job         string
	ScheduledAt *time.Time
}

// CallKeySource follows runID's recovery chain back to the run it started from: a recovery
// run does that run's slot again, and must call with its key.
func (q queries) CallKeySource(ctx context.Context, runID int64) (CallKeySource, error) {
	const chain = `
		WITH RECURSIVE chain AS (
			SELECT id, job, scheduled_at, recovers_run_id, 0 AS depth FROM job_runs WHERE id = $1
			UNION ALL
			SELECT r.id, r.job, r.scheduled_at, r.recovers_run_id, c.depth + 1
			FROM job_runs r JOIN chain c ON r.id = c.recovers_run_id
			WHERE c.depth < 1000
		)
		SELECT (SELECT deployment_id FROM scheduler_identity), id, job, scheduled_at
		FROM chain ORDER BY depth DESC LIMIT 1`
	var s CallKeySource
	err := q.q.QueryRow(ctx, chain, runID).Scan(&s.Deployment, &s.RootRunID, &s.Job, &s.ScheduledAt)
	if err != nil {
		return s, fmt.Errorf("read the slot of run %d: %w", runID, err)
	}
	return s, nil
}
