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

// Queries the HTTP API needs: job settings and last runs, manual triggers, run history, the
// cancel request, and the cluster views (leader row, instances, advisory locks).

// DBTX is what a query needs: the pool, or a transaction when several statements must commit
// together (an Idempotency-Key claim and the run it creates).
type DBTX interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// ErrRunNotFound means no run has the id asked for.
var ErrRunNotFound = errors.New("run not found")

// JobStates returns, for each named job, whether it is paused and its most recent run (nil
// when it never ran), with the database's clock, so "next run" is computed on the clock
// every replica shares.
func (db *DB) JobStates(ctx context.Context, jobs []string) (now time.Time, paused map[string]bool, last map[string]*Run, err error) {
	paused = make(map[string]bool, len(jobs))
	rows, err := db.Pool.Query(ctx, `
		SELECT now(), s.job, s.paused
		FROM (SELECT now()) AS clock
		LEFT JOIN job_settings s ON s.job = ANY ($1::text[])`, jobs)
	if err != nil {
		return now, nil, nil, fmt.Errorf("read job settings: %w", err)
	}
	for rows.Next() {
		var job *string
		var p *bool
		if err := rows.Scan(&now, &job, &p); err != nil {
			rows.Close()
			return now, nil, nil, fmt.Errorf("read job settings: %w", err)
		}
		if job != nil && p != nil {
			paused[*job] = *p
		}
	}
	if err := rows.Err(); err != nil {
		return now, nil, nil, fmt.Errorf("read job settings: %w", err)
	}

	// One index probe per job on job_runs_job_id_idx, however long the history is (the job
	// range and order keep the planner off a backward primary-key walk; see listRunsSQL).
	rows, err = db.Pool.Query(ctx, `
		SELECT r.* FROM unnest($1::text[]) AS j(name)
		CROSS JOIN LATERAL (
			SELECT `+RunColumns+` FROM job_runs
			WHERE job >= j.name AND job <= j.name
			ORDER BY job, id DESC LIMIT 1
		) AS r`, jobs)
	if err != nil {
		return now, nil, nil, fmt.Errorf("read last runs: %w", err)
	}
	list, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (*Run, error) { return ScanRun(row) })
	if err != nil {
		return now, nil, nil, fmt.Errorf("read last runs: %w", err)
	}
	last = make(map[string]*Run, len(list))
	for _, r := range list {
		last[r.Job] = r
	}
	return now, paused, last, nil
}

// SetPaused records in job_settings that job is paused (or not). Every replica, and the next
// leader, reads it from there.
func (db *DB) SetPaused(ctx context.Context, job string, paused bool) error {
	_, err := db.Pool.Exec(ctx, `
		INSERT INTO job_settings (job, paused, updated_at) VALUES ($1, $2, now())
		ON CONFLICT (job) DO UPDATE SET paused = EXCLUDED.paused, updated_at = EXCLUDED.updated_at`,
		job, paused)
	if err != nil {
		return fmt.Errorf("set paused=%t for job %s: %w", paused, job, err)
	}
	return nil
}

// QueueManualRun inserts a queued manual run of job, unless the job already has a queued or
// running run: then it returns that one with created=false. The partial unique index
// job_runs_one_active_key decides, so concurrent triggers on any replicas create one run:
// a second INSERT waits for the first to commit and then does nothing.
func QueueManualRun(ctx context.Context, q DBTX, job string, reason *string, params []byte) (run *Run, created bool, err error) {
	// The active run can finish between our INSERT (which saw it) and our SELECT (which no
	// longer does); then a new run may be queued after all, so try again.
	for range 5 {
		run, err = ScanRun(q.QueryRow(ctx, `
			INSERT INTO job_runs (job, trigger, status, reason, params)
			VALUES ($1, 'manual', 'queued', $2, $3)
			ON CONFLICT (job) WHERE status IN ('queued', 'running') DO NOTHING
			RETURNING `+RunColumns, job, reason, params))
		if err == nil {
			return run, true, nil
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			return nil, false, fmt.Errorf("queue a manual run of %s: %w", job, err)
		}
		run, err = ScanRun(q.QueryRow(ctx, `
			SELECT `+RunColumns+` FROM job_runs WHERE job = $1 AND status IN ('queued', 'running')`, job))
		if err == nil {
			return run, false, nil
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			return nil, false, fmt.Errorf("read the active run of %s: %w", job, err)
		}
	}
	return nil, false, fmt.Errorf("queue a manual run of %s: its active run kept changing; try again", job)
}

// Run returns the run with id, or ErrRunNotFound.
func (db *DB) Run(ctx context.Context, id int64) (*Run, error) {
	run, err := ScanRun(db.Pool.QueryRow(ctx, `SELECT `+RunColumns+` FROM job_runs WHERE id = $1`, id))
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
}

// ListRuns returns one page of a job's runs, newest (highest id) first. Paging by id keeps
// every page an index range scan that starts at the cursor (job_runs_job_id_idx, or the
// status/trigger indexes of migration 0006), so a deep page costs what the first one does.
func (db *DB) ListRuns(ctx context.Context, f RunFilter) ([]*Run, error) {
	sql, args := listRunsSQL(f)
	rows, err := db.Pool.Query(ctx, sql, args...)
	if err != nil {
		return nil, fmt.Errorf("list runs of %s: %w", f.Job, err)
	}
	runs, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (*Run, error) { return ScanRun(row) })
	if err != nil {
		return nil, fmt.Errorf("list runs of %s: %w", f.Job, err)
	}
	return runs, nil
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
	args = append(args, f.Limit)
	return `SELECT ` + RunColumns + ` FROM job_runs WHERE ` + strings.Join(where, " AND ") +
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
func (db *DB) CancelRun(ctx context.Context, id int64) (*Run, CancelOutcome, error) {
	// The run may start between the two guarded UPDATEs; then the second one catches it.
	for range 3 {
		run, err := ScanRun(db.Pool.QueryRow(ctx, `
			UPDATE job_runs SET status = 'cancelled', finished_at = now(), error = 'cancelled before it started'
			WHERE id = $1 AND status = 'queued'
			RETURNING `+RunColumns, id))
		if err == nil {
			return run, CancelledQueued, nil
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			return nil, 0, fmt.Errorf("cancel run %d: %w", id, err)
		}
		// Setting cancel_requested fires the NOTIFY trigger, which wakes the leader.
		run, err = ScanRun(db.Pool.QueryRow(ctx, `
			UPDATE job_runs SET cancel_requested = true
			WHERE id = $1 AND status = 'running'
			RETURNING `+RunColumns, id))
		if err == nil {
			return run, CancelRequested, nil
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			return nil, 0, fmt.Errorf("request the cancel of run %d: %w", id, err)
		}
		run, err = db.Run(ctx, id)
		if err != nil {
			return nil, 0, err
		}
		if run.Finished() {
			return run, CancelTooLate, nil
		}
	}
	return nil, 0, fmt.Errorf("cancel run %d: its status kept changing; try again", id)
}

// KnownLock names an advisory lock the scheduler takes with a fixed key,
// hashtextextended(Name, 0), so the lock view can say what it is for.
type KnownLock struct {
	Name    string
	Meaning string
}

// KnownLocks are the scheduler's fixed-key advisory locks. Per-entity locks of the jobs use
// hashtextextended('<job>:<entity id>', 0), which cannot be reversed, so they show as keys.
var KnownLocks = []KnownLock{
	{Name: "scheduler-leader", Meaning: "leader election: held by the leader's dedicated session"},
}

// AdvisoryLock is one advisory lock held or awaited in this database.
type AdvisoryLock struct {
	PID             int32
	ApplicationName string
	Granted         bool
	Mode            string
	// Key is the 64-bit key of pg_advisory_lock(bigint) (ObjSubID 1); for the two-int4 form
	// (ObjSubID 2) it is ClassID and ObjID side by side the same way.
	Key      int64
	ClassID  uint32
	ObjID    uint32
	ObjSubID int16
	// Since is when the wait began (waiting) or, for a granted lock, the start of the
	// holder's transaction, or of its session when it is idle (a session-level lock such as
	// the leader's) — PostgreSQL does not record when an advisory lock was granted.
	Since *time.Time
	// AgeMS is now() - Since in milliseconds, on the database clock.
	AgeMS *int64
	Known *KnownLock
}

// AdvisoryLocks lists the advisory locks of the current database from pg_locks joined with
// pg_stat_activity, holders first, oldest first.
func (db *DB) AdvisoryLocks(ctx context.Context) ([]AdvisoryLock, error) {
	names := make([]string, len(KnownLocks))
	for i, k := range KnownLocks {
		names[i] = k.Name
	}
	rows, err := db.Pool.Query(ctx, `
		WITH known AS (
			SELECT name, hashtextextended(name, 0) AS key FROM unnest($1::text[]) AS name
		), locks AS (
			SELECT l.pid, l.granted, l.mode, l.classid::int8 AS classid, l.objid::int8 AS objid, l.objsubid,
			       (l.classid::int8 << 32) | l.objid::int8 AS key,
			       CASE WHEN l.granted THEN coalesce(a.xact_start, a.backend_start) ELSE l.waitstart END AS since,
			       coalesce(a.application_name, '') AS application_name
			FROM pg_locks l
			LEFT JOIN pg_stat_activity a ON a.pid = l.pid
			WHERE l.locktype = 'advisory'
			  AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
		)
		SELECT locks.pid, locks.application_name, locks.granted, locks.mode, locks.key,
		       locks.classid, locks.objid, locks.objsubid, locks.since,
		       (extract(epoch FROM now() - locks.since) * 1000)::int8, known.name
		FROM locks
		LEFT JOIN known ON known.key = locks.key AND locks.objsubid = 1
		ORDER BY locks.granted DESC, locks.since NULLS LAST, locks.key, locks.pid`, names)
	if err != nil {
		return nil, fmt.Errorf("list advisory locks: %w", err)
	}
	defer rows.Close()
	var list []AdvisoryLock
	for rows.Next() {
		var l AdvisoryLock
		var classID, objID int64
		var known *string
		if err := rows.Scan(&l.PID, &l.ApplicationName, &l.Granted, &l.Mode, &l.Key, &classID, &objID,
			&l.ObjSubID, &l.Since, &l.AgeMS, &known); err != nil {
			return nil, fmt.Errorf("list advisory locks: %w", err)
		}
		l.ClassID, l.ObjID = uint32(classID), uint32(objID)
		if known != nil {
			for i := range KnownLocks {
				if KnownLocks[i].Name == *known {
					l.Known = &KnownLocks[i]
				}
			}
		}
		list = append(list, l)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list advisory locks: %w", err)
	}
	return list, nil
}
