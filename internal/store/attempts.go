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
	return tx.recordAttempts(ctx, []int64{runID}, []Attempt{a})
}

// recordAttempts records attempts[i] of runs[i], in one statement.
func (tx *Tx) recordAttempts(ctx context.Context, runs []int64, attempts []Attempt) error {
	numbers := make([]int32, len(attempts))
	started := make([]time.Time, len(attempts))
	ms := make([]int64, len(attempts))
	codes := make([]*int, len(attempts))
	bodies := make([]*string, len(attempts))
	errs := make([]*string, len(attempts))
	for i, a := range attempts {
		numbers[i], started[i], ms[i] = int32(a.Number), a.StartedAt, a.Duration.Milliseconds()
		codes[i], bodies[i], errs[i] = a.StatusCode, a.Body, a.Error
	}
	_, err := tx.Exec(ctx, `
		INSERT INTO run_attempts (run_id, attempt, started_at, duration_ms, status_code, body, error)
		SELECT * FROM unnest($1::bigint[], $2::int[], $3::timestamptz[], $4::bigint[], $5::int[], $6::text[], $7::text[])
		ON CONFLICT (run_id, attempt) DO NOTHING`, runs, numbers, started, ms, codes, bodies, errs)
	if err != nil {
		return fmt.Errorf("record %d attempts: %w", len(attempts), err)
	}
	return nil
}

// SetNextAttempt records when run's next call attempt starts, inside the leader's fenced
// transaction like its attempts: at, when a failed attempt is followed by a backoff wait; nil
// when the wait is over. A run no longer running keeps none.
func (tx *Tx) SetNextAttempt(ctx context.Context, runID int64, at *time.Time) error {
	_, err := tx.Exec(ctx, `UPDATE job_runs SET next_attempt_at = $2 WHERE id = $1 AND status = 'running'`, runID, at)
	if err != nil {
		return fmt.Errorf("record the next attempt of run %d: %w", runID, err)
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

// Deployment is this database's deployment id (scheduler_identity), drawn once by the
// migration: runtime jobs' Idempotency-Keys are derived from it.
func (q queries) Deployment(ctx context.Context) (uuid.UUID, error) {
	var id uuid.UUID
	if err := q.q.QueryRow(ctx, `SELECT deployment_id FROM scheduler_identity`).Scan(&id); err != nil {
		return id, fmt.Errorf("read the deployment id: %w", err)
	}
	return id, nil
}
