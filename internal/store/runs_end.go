package store

import (
	"context"
	"encoding/json"
	"fmt"
	"time"
)

// The end of a run, however it comes (the leader's finisher, a callback's completion on any
// replica, the callback watch, a cancel, a replace, the rescuer): one statement, endRunsSQL,
// writes the ends and announces each on RunFinishedChannel, in bulk. The callers choose the
// runs and their statuses; what an end means (notification events, the automatic pause) is
// decided by internal/runend, in the same transaction, from the job's loaded definition.

// Finish is one run's end.
type Finish struct {
	RunID  int64
	Status string
	Stats  json.RawMessage // nil keeps the run's stats
	Error  *string
	// Version, when set, is the runtime definition the run ran.
	Version *int64
	// Attempts are the run's call attempts not recorded yet (FinishRuns).
	Attempts []Attempt
	// EndedAgo is how long before the statement the run ended (its end waited for its
	// batch): finished_at is the database's now() less it, and never before started_at.
	EndedAgo time.Duration
	// From is the status the run must still have (StatusRunning when empty): an end is
	// recorded once, and a queued run is ended only by what may end it before it starts.
	From string
	// Output, when set, is kept in the run's stats (a callback's completion).
	Output *string
	// Cancel marks the run's cancellation asked for too (a replace).
	Cancel bool
}

// Ended is a run whose end was recorded.
type Ended struct {
	ID      int64
	Job     string
	Trigger string
	Status  string
	// follow: the run's job has children, or slots of its own waiting for its active runs
	// to end (after.go); its end has more to record.
	follow bool
}

// endRunsSQL records many runs' ends at once, each only from the status it must still have,
// and announces each on RunFinishedChannel. It is the one statement that ends a run. Its
// tenth argument is the now of the ends (nowSQL, spelled out in the constant): nil but in tests.
// Each end says whether its job has children or waiting slots (after.go): both sets are
// read once per statement, the first by one search of the definitions' index of parents,
// the second from a table that is usually empty, so the ends of jobs without children pay
// an index search and two small hashed look-ups.
const endRunsSQL = `
WITH ended AS (
	UPDATE job_runs r
	SET status = f.status, finished_at = greatest(coalesce($10::timestamptz, now()) - f.ago * interval '1 microsecond', r.started_at),
	    stats = CASE WHEN f.output IS NULL THEN coalesce(f.stats, r.stats)
	                 ELSE coalesce(f.stats, r.stats, '{}') || jsonb_build_object('output', f.output) END,
	    error = f.error, next_attempt_at = NULL,
	    definition_version = coalesce(f.version, r.definition_version),
	    cancel_requested = r.cancel_requested OR f.cancel
	FROM unnest($1::bigint[], $2::text[], $3::text[], $4::jsonb[], $5::text[], $6::bigint[], $7::bigint[], $8::text[], $9::boolean[])
	     AS f (id, from_status, status, stats, error, version, ago, output, cancel)
	-- The constant test lets each day read its index of active runs (job_runs_*_active_idx),
	-- not all its rows: an end is always from queued or running (TestEndsReadTheIndexOfActiveRuns).
	WHERE r.id = f.id AND r.status = f.from_status AND r.status IN ('queued', 'running')
	RETURNING r.id, r.job, r.trigger, r.status
), chained AS MATERIALIZED (
	-- The ended runs' jobs that are parents: one search of the definitions' index of parents
	-- with the ended jobs as its keys (TestEndsReadTheChainedDefinitionsByIndex).
	SELECT DISTINCT p.job
	FROM job_definitions d, unnest(d.after_keys) AS p (job)
	WHERE d.after_keys && (SELECT array_agg(DISTINCT job) FROM ended)
)
SELECT id, job, trigger, status, pg_notify('` + RunFinishedChannel + `', id::text) IS NULL,
       job IN (SELECT job FROM chained) OR job IN (SELECT job FROM scheduler_after_waiting)
FROM ended`

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

// endRuns records the ends inside the caller's transaction, and
// returns the runs it ended: a run missing from them no longer had the status it was ended
// from. It runs inside a transaction (SET LOCAL) when it ends more than one run. now, the
// time the ends are recorded at (less each one's EndedAgo), is nil but in tests (NowOr).
func (q queries) endRuns(ctx context.Context, now *time.Time, ends []Finish) ([]Ended, error) {
	if len(ends) == 0 {
		return nil, nil
	}
	ids := make([]int64, len(ends))
	from := make([]string, len(ends))
	statuses := make([]string, len(ends))
	stats := make([]json.RawMessage, len(ends))
	errs := make([]*string, len(ends))
	versions := make([]*int64, len(ends))
	ago := make([]int64, len(ends))
	outputs := make([]*string, len(ends))
	cancels := make([]bool, len(ends))
	for i, f := range ends {
		ids[i], statuses[i], stats[i], errs[i], versions[i] = f.RunID, f.Status, f.Stats, f.Error, f.Version
		from[i], outputs[i], cancels[i] = f.From, f.Output, f.Cancel
		if from[i] == "" {
			from[i] = StatusRunning
		}
		ago[i] = max(f.EndedAgo, 0).Microseconds()
	}
	if len(ends) > 1 {
		if _, err := q.q.Exec(ctx, forceCustomPlan); err != nil {
			return nil, fmt.Errorf("end %d runs: %w", len(ends), err)
		}
	}
	rows, err := q.q.Query(ctx, endRunsSQL, ids, from, statuses, stats, errs, versions, ago, outputs, cancels, now)
	if err != nil {
		return nil, fmt.Errorf("end %d runs: %w", len(ends), err)
	}
	defer rows.Close()
	out := make([]Ended, 0, len(ends))
	for rows.Next() {
		var x Ended
		var ignored bool
		if err := rows.Scan(&x.ID, &x.Job, &x.Trigger, &x.Status, &ignored, &x.follow); err != nil {
			return nil, fmt.Errorf("end %d runs: %w", len(ends), err)
		}
		out = append(out, x)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("end %d runs: %w", len(ends), err)
	}
	if err := q.follow(ctx, out); err != nil {
		return nil, fmt.Errorf("end %d runs: %w", len(ends), err)
	}
	return out, nil
}

// FinishRuns records the ends of many runs, and their pending attempts, inside the caller's
// fenced transaction, and returns the runs it ended: a run missing from them was no longer
// running (ErrNotRunning, for FinishRun).
func (tx *Tx) FinishRuns(ctx context.Context, finishes []Finish) ([]Ended, error) {
	var attempts []Attempt
	var attemptRuns []int64
	for _, f := range finishes {
		for _, a := range f.Attempts {
			attempts, attemptRuns = append(attempts, a), append(attemptRuns, f.RunID)
		}
	}
	if len(attempts) > 0 {
		if err := tx.recordAttempts(ctx, attemptRuns, attempts); err != nil {
			return nil, err
		}
	}
	return tx.endRuns(ctx, nil, finishes)
}
