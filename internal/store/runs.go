package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// job_runs: the run record, read by the API and the engine; manual runs and cancels.
// The leader's fenced writes to job_runs (slot claims, pick-ups, finishes, recovery) are in
// runs_claim.go.

// Run statuses and triggers (api/openapi.yaml, Run).
const (
	StatusQueued    = "queued"
	StatusRunning   = "running"
	StatusSucceeded = "succeeded"
	StatusFailed    = "failed"
	StatusSkipped   = "skipped"
	StatusTimedOut  = "timed_out"
	StatusAbandoned = "abandoned"
	StatusCancelled = "cancelled"
	StatusMissed    = "missed"

	TriggerSchedule = "schedule"
	TriggerManual   = "manual"
	TriggerCatchUp  = "catch-up"
	TriggerRecovery = "recovery"
	TriggerRerun    = "rerun"
	TriggerBackfill = "backfill"
)

// Run is one row of job_runs. Its JSON shape is the API's (api/views.go), not this struct's.
type Run struct {
	ID              int64
	Job             string
	Trigger         string
	Status          string
	ScheduledAt     *time.Time
	CreatedAt       time.Time
	StartedAt       *time.Time
	FinishedAt      *time.Time
	InstanceID      *string
	Epoch           *int64
	Stats           json.RawMessage
	Error           *string
	Reason          *string
	Params          json.RawMessage
	RecoversRunID   *int64
	CancelRequested bool
	// DefinitionVersion is the runtime job definition's version the run ran (nil for a
	// built-in job, and for a runtime job's run not started yet).
	DefinitionVersion *int64
	// Rerun numbers a slot's rows: 0 for the slot's own run, 1, 2, ... for its re-runs and
	// backfill runs (trigger rerun, backfill).
	Rerun int
	// NextAttemptAt is when a running run's next call attempt starts, while it waits out a
	// backoff between two attempts (SetNextAttempt); nil otherwise.
	NextAttemptAt *time.Time
	// Traceparent is the W3C trace context a manual trigger brought (ManualTrigger), which
	// the leader's run joins; nil for any other run. Not shown by the API.
	Traceparent *string
}

// DurationMS is finished_at - started_at in milliseconds, nil while unfinished.
func (r *Run) DurationMS() *int64 {
	if r.StartedAt == nil || r.FinishedAt == nil {
		return nil
	}
	ms := r.FinishedAt.Sub(*r.StartedAt).Milliseconds()
	return &ms
}

// Finished reports whether the run reached a final status.
func (r *Run) Finished() bool {
	return r.Status != StatusQueued && r.Status != StatusRunning
}

// runColumns lists job_runs' columns in the order scanRun expects.
const runColumns = `id, job, trigger, status, scheduled_at, created_at, started_at, finished_at,
	instance_id, epoch, stats, error, reason, params, recovers_run_id, cancel_requested, definition_version, rerun, next_attempt_at,
	traceparent`

// scanRun scans one row selected with runColumns.
func scanRun(row interface{ Scan(...any) error }) (*Run, error) {
	var r Run
	if err := row.Scan(r.columns()...); err != nil {
		return nil, err
	}
	return &r, nil
}

// columns are r's fields in runColumns' order, for Scan: the one list a statement that
// returns runColumns after columns of its own appends to.
func (r *Run) columns() []any {
	return []any{&r.ID, &r.Job, &r.Trigger, &r.Status, &r.ScheduledAt, &r.CreatedAt, &r.StartedAt,
		&r.FinishedAt, &r.InstanceID, &r.Epoch, &r.Stats, &r.Error, &r.Reason, &r.Params,
		&r.RecoversRunID, &r.CancelRequested, &r.DefinitionVersion, &r.Rerun, &r.NextAttemptAt, &r.Traceparent}
}

// ErrRunNotFound means no run has the id asked for.
var ErrRunNotFound = errors.New("run not found")

// queueManualRunSQL answers a trigger in one statement, so in one snapshot: a new queued
// run while the job has fewer active runs than its bound (overlap.go), else its newest active
// run. Two statements (insert unless active, then read the active run) saw two snapshots,
// and a run that finished between them left the second one empty: a race, which a trigger
// must answer, not fail (issue 28).
const queueManualRunSQL = `
WITH active AS (
	SELECT ` + runColumns + ` FROM job_runs WHERE job = $1 AND status IN ('queued', 'running')
), queued AS (
	INSERT INTO job_runs (job, trigger, status, reason, params, traceparent, partition_id)
	SELECT $1, 'manual', 'queued', $2, $3, nullif($4, ''), job_run_partition($1)
	WHERE (SELECT count(*) FROM active) < job_run_bound($1)
	RETURNING ` + runColumns + `
)
SELECT true, * FROM queued
UNION ALL
(SELECT false, * FROM active WHERE NOT EXISTS (SELECT 1 FROM queued) ORDER BY id DESC LIMIT 1)`

// QueueManualRun inserts a queued manual run of job, unless the job already has its bound of
// queued or running runs (one, but for overlap allow's max_concurrent): then it returns the
// newest (as it was when seen: it may have finished since) with created=false. A manual run
// never replaces a run (overlap replace): the operator cancels it first. The run is queued in
// the job's partition, whose leader runs it. Under its partition's activeRunsLock, concurrent triggers on any replicas create no run past the bound: a
// second one waits for the first to commit and then counts its run.
func (q queries) QueueManualRun(ctx context.Context, job string, reason *string, params []byte) (run *Run, created bool, err error) {
	return q.queueManualRun(ctx, job, reason, params, "")
}

// queueManualRun is QueueManualRun of a trigger that brought a traceparent ("": none).
func (q queries) queueManualRun(ctx context.Context, job string, reason *string, params []byte, traceparent string) (run *Run, created bool, err error) {
	err = inTx(ctx, q.q, func(tx pgx.Tx) error {
		if err := lockActiveRunsOf(ctx, tx, job); err != nil {
			return err
		}
		var r Run
		err := tx.QueryRow(ctx, queueManualRunSQL, job, reason, params, traceparent).Scan(append([]any{&created}, r.columns()...)...)
		run = &r
		return err
	})
	if err != nil {
		return nil, false, fmt.Errorf("queue a manual run of %s: %w", job, err)
	}
	return run, created, nil
}

// inTx runs fn in a transaction on q: a new one on the pool, a savepoint inside one.
func inTx(ctx context.Context, q dbtx, fn func(pgx.Tx) error) error {
	return pgx.BeginFunc(ctx, q.(interface {
		Begin(ctx context.Context) (pgx.Tx, error)
	}), fn)
}

// Run returns the run with id, or ErrRunNotFound.
func (q queries) Run(ctx context.Context, id int64) (*Run, error) {
	run, err := scanRun(q.q.QueryRow(ctx, `SELECT `+runColumns+` FROM job_runs WHERE id = $1`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, ErrRunNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("read run %d: %w", id, err)
	}
	return run, nil
}

// RunFilter selects a page of one job's history, newest first.
type RunFilter struct {
	Job      string
	Status   string     // "" for any
	Trigger  string     // "" for any
	Since    *time.Time // created_at >= Since
	Until    *time.Time // created_at < Until
	BeforeID int64      // keyset: only ids below this one (0: from the newest)
	Limit    int

	fromID int64 // only ids from this one (0: any); see recentIDFloor
}

// ListRuns returns one page of a job's runs, newest (highest id) first. Paging by id keeps
// every page an index range scan that starts at the cursor (job_runs_job_id_idx, or the
// status/trigger indexes of migration 0006), so a deep page costs what the first one does.
// The page is read from the cursor's day and the day before first (recentIDFloor), and
// from the older days only when those two do not fill it.
func (q queries) ListRuns(ctx context.Context, f RunFilter) ([]*Run, error) {
	floor := recentIDFloor(f.BeforeID, time.Now())
	recent := f
	recent.fromID = floor
	runs, err := q.listRuns(ctx, recent)
	if err != nil || len(runs) >= f.Limit || floor == 0 {
		return runs, err
	}
	older := f
	older.BeforeID, older.Limit = floor, f.Limit-len(runs)
	more, err := q.listRuns(ctx, older)
	return append(runs, more...), err
}

func (q queries) listRuns(ctx context.Context, f RunFilter) ([]*Run, error) {
	sql, args := listRunsSQL(f)
	rows, err := q.q.Query(ctx, sql, args...)
	if err != nil {
		return nil, fmt.Errorf("list runs of %s: %w", f.Job, err)
	}
	runs, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (*Run, error) { return scanRun(row) })
	if err != nil {
		return nil, fmt.Errorf("list runs of %s: %w", f.Job, err)
	}
	return runs, nil
}

// recentIDFloor is the lowest id of the day before the newest day a read of a job's newest
// runs can return (the day of the id below cursor, or today without a cursor), or 0 when
// the cursor is an id from before migration 0013. Such a read is a probe of the job's
// index in every day partition: bounded by this floor, PostgreSQL plans and probes the two
// newest days (and the few days ahead, which are empty) instead of all thirty-odd, whose
// planning alone took 3 ms (15 ms on a new connection). The reads look at the older days
// only for what the two newest did not hold, so the bound changes no answer.
func recentIDFloor(cursor int64, now time.Time) int64 {
	day := now.UTC().Unix() / 86400
	if cursor > 0 {
		day = min(day, (cursor-1)>>dayIDShift)
	}
	if day < 1 {
		return 0
	}
	return (day - 1) << dayIDShift
}

// dayIDShift places a run's day in its id (job_run_id in migration 0013).
const dayIDShift = 37

// CancelRequested lists the running runs of partition's term epoch whose cancellation was
// requested.
func (q queries) CancelRequested(ctx context.Context, partition int, epoch int64) ([]int64, error) {
	rows, err := q.q.Query(ctx,
		`SELECT id FROM job_runs WHERE status = 'running' AND cancel_requested AND partition_id = $1 AND epoch = $2`, partition, epoch)
	if err != nil {
		return nil, fmt.Errorf("list cancel requests: %w", err)
	}
	return pgx.CollectRows(rows, pgx.RowTo[int64])
}

// RunningRuns lists the running runs of partition's term epoch: the rescuer compares them
// with the runs the leader owns. An accepted callback run is owned by no goroutine on purpose
// (its target completes it), so it is not listed.
func (q queries) RunningRuns(ctx context.Context, partition int, epoch int64) ([]int64, error) {
	rows, err := q.q.Query(ctx, `SELECT id FROM job_runs
		WHERE status = 'running' AND partition_id = $1 AND epoch = $2 AND callback_accepted_at IS NULL`, partition, epoch)
	if err != nil {
		return nil, fmt.Errorf("list running runs: %w", err)
	}
	return pgx.CollectRows(rows, pgx.RowTo[int64])
}

// listRunsSQL joins only fixed predicates with placeholders; each filter combination is its
// own statement, so the planner sees which index applies (a catch-all "$2 IS NULL OR
// status = $2" would defeat the indexes once pgx's cached statement goes generic).
//
// The job is matched as the range [$1, $1] and the order is (job, id DESC) on purpose: with
// "job = $1 ORDER BY id DESC" the planner may walk the primary key backwards and filter on
// job, assuming the job's runs are spread evenly over the ids; for a job whose runs are all
// old (disabled for months while others ran) that reads the whole newer history before the
// first match. The range keeps (job, ...) a sort key that only the job-leading indexes
// provide, so a page is always a range scan from the cursor (TestHistoryPagesUseAnIndex).
func listRunsSQL(f RunFilter) (string, []any) {
	where := []string{"job >= $1", "job <= $1"}
	args := []any{f.Job}
	add := func(cond string, v any) {
		args = append(args, v)
		where = append(where, fmt.Sprintf(cond, len(args)))
	}
	if f.Status != "" {
		add("status = $%d", f.Status)
	}
	if f.Trigger != "" {
		add("trigger = $%d", f.Trigger)
	}
	if f.Since != nil {
		add("created_at >= $%d", *f.Since)
	}
	if f.Until != nil {
		add("created_at < $%d", *f.Until)
	}
	if f.BeforeID > 0 {
		add("id < $%d", f.BeforeID)
	}
	if f.fromID > 0 {
		add("id >= $%d", f.fromID)
	}
	args = append(args, f.Limit)
	return `SELECT ` + runColumns + ` FROM job_runs WHERE ` + strings.Join(where, " AND ") +
		fmt.Sprintf(` ORDER BY job, id DESC LIMIT $%d`, len(args)), args
}

// CancelOutcome says what CancelRun did.
type CancelOutcome int

const (
	// CancelledQueued: the run had not started and is now cancelled.
	CancelledQueued CancelOutcome = iota + 1
	// CancelRequested: the run is running; the leader's engine cancels its context.
	CancelRequested
	// CancelTooLate: the run had already finished; nothing changed.
	CancelTooLate
)

// CancelRun cancels a queued run at once, or asks the leader to cancel a running one. No
// fence is needed: the engine moves a run from queued to running with an UPDATE guarded by
// status = 'queued' too, so exactly one of the two wins and the other changes nothing.
func (q queries) CancelRun(ctx context.Context, id int64) (*Run, CancelOutcome, error) {
	// The run may start between the two guarded UPDATEs; then the second one catches it.
	for range 3 {
		reason := "cancelled before it started"
		var ended []Ended
		// In a transaction: the end of a child's queued run queues its waiting slot (after.go).
		err := inTx(ctx, q.q, func(tx pgx.Tx) error {
			var err error
			ended, err = queries{tx}.endRuns(ctx, nil, []Finish{{RunID: id, From: StatusQueued, Status: StatusCancelled, Error: &reason}})
			return err
		})
		if err != nil {
			return nil, 0, fmt.Errorf("cancel run %d: %w", id, err)
		}
		if len(ended) == 1 {
			run, err := q.Run(ctx, id)
			return run, CancelledQueued, err
		}
		// Setting cancel_requested fires the NOTIFY trigger, which wakes the leader.
		run, err := scanRun(q.q.QueryRow(ctx, `
			UPDATE job_runs SET cancel_requested = true
			WHERE id = $1 AND status = 'running'
			RETURNING `+runColumns, id))
		if err == nil {
			return run, CancelRequested, nil
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			return nil, 0, fmt.Errorf("request the cancel of run %d: %w", id, err)
		}
		run, err = q.Run(ctx, id)
		if err != nil {
			return nil, 0, err
		}
		if run.Finished() {
			return run, CancelTooLate, nil
		}
	}
	return nil, 0, fmt.Errorf("cancel run %d: its status kept changing; try again", id)
}
