package store

import (
	"context"
	"encoding/json"
	"fmt"
	"time"
)

// Finishes in bulk: the ends of many runs recorded in one fenced statement.

// Finish is one run's end, for FinishRuns.
type Finish struct {
	RunID   int64
	Status  string
	Stats   json.RawMessage
	Error   *string
	Version *int64
	// Attempts are the run's call attempts not recorded yet.
	Attempts []Attempt
	// EndedAgo is how long before the statement the run ended (its end waited for its
	// batch): finished_at is the database's now() less it, and never before started_at.
	EndedAgo time.Duration
}

// finishRunsSQL records many runs' ends at once, as FinishRun does one's, and announces each
// on RunFinishedChannel.
const finishRunsSQL = `
WITH finished AS (
	UPDATE job_runs r
	SET status = f.status, finished_at = greatest(now() - f.ago * interval '1 microsecond', r.started_at),
	    stats = f.stats, error = f.error, next_attempt_at = NULL,
	    definition_version = coalesce(f.version, r.definition_version)
	FROM unnest($1::bigint[], $2::text[], $3::jsonb[], $4::text[], $5::bigint[], $6::bigint[])
	     AS f (id, status, stats, error, version, ago)
	WHERE r.id = f.id AND r.status = 'running'
	RETURNING r.id
)
SELECT id, pg_notify('` + RunFinishedChannel + `', id::text) IS NULL FROM finished`

// forceCustomPlan makes the statements of the transaction that sets it planned for their
// own arguments every time. The statements over arrays (a slot's claims, a batch's ends) are
// prepared statements of the connection they run on, and from the sixth execution there
// PostgreSQL may plan them once for any arrays (a generic plan), guessing ten elements
// where there are thousands. For the claim of 10 000 slots that plan joined with nested
// loops: 1.4 times the custom plan's time on a test database, more in the scale benchmark
// (docs/benchmarks-history.md, "Claims planned for their arrays"). For 1 500 ends it probed the partial
// index of active runs once per end, reading all of it each time: 185 ms against 27 ms.
// Planning them costs a few milliseconds.
const forceCustomPlan = `SET LOCAL plan_cache_mode = force_custom_plan`

// FinishRuns records the ends of many runs, and their pending attempts, inside the caller's
// fenced transaction, and returns the ids it finished: a run missing from them was no longer
// running (ErrNotRunning, for FinishRun).
func (tx *Tx) FinishRuns(ctx context.Context, finishes []Finish) (map[int64]bool, error) {
	ids := make([]int64, len(finishes))
	statuses := make([]string, len(finishes))
	stats := make([]json.RawMessage, len(finishes))
	errs := make([]*string, len(finishes))
	versions := make([]*int64, len(finishes))
	ago := make([]int64, len(finishes))
	var attempts []Attempt
	var attemptRuns []int64
	for i, f := range finishes {
		ids[i], statuses[i], stats[i], errs[i], versions[i] = f.RunID, f.Status, f.Stats, f.Error, f.Version
		ago[i] = max(f.EndedAgo, 0).Microseconds()
		for _, a := range f.Attempts {
			attempts, attemptRuns = append(attempts, a), append(attemptRuns, f.RunID)
		}
	}
	if len(attempts) > 0 {
		if err := tx.recordAttempts(ctx, attemptRuns, attempts); err != nil {
			return nil, err
		}
	}
	if _, err := tx.Exec(ctx, forceCustomPlan); err != nil {
		return nil, fmt.Errorf("finish %d runs: %w", len(finishes), err)
	}
	rows, err := tx.Query(ctx, finishRunsSQL, ids, statuses, stats, errs, versions, ago)
	if err != nil {
		return nil, fmt.Errorf("finish %d runs: %w", len(finishes), err)
	}
	defer rows.Close()
	done := make(map[int64]bool, len(finishes))
	for rows.Next() {
		var id int64
		var ignored bool
		if err := rows.Scan(&id, &ignored); err != nil {
			return nil, fmt.Errorf("finish %d runs: %w", len(finishes), err)
		}
		done[id] = true
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("finish %d runs: %w", len(finishes), err)
	}
	return done, nil
}
