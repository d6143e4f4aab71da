// Package storetest makes the rows tests start from (runs, runtime job definitions,
// namespaces) the way production makes them, so that a test states only the fields it is
// about. A run's id carries the UTC day of its slot (of its creation without one) and the
// timeline it was drawn on (migrations 0013 and 0015), and the row lives in that day's
// partition: a test that wrote job_runs by hand had to know all three, and one that did not
// put its rows where no query of production would look for them.
package storetest

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/schedulerhq/scheduler/internal/store"
)

// DBTX is what the factories write through: a pool, a connection or a transaction.
type DBTX interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// Ptr returns a pointer to v, for the options where the zero value is meaningful (epoch 0).
func Ptr[T any](v T) *T { return &v }

// RunOpts are the fields of a run a test sets. A zero field is the column's default:
// NULL, or what production writes when it has nothing to say ('{}' for stats and params,
// now() for created_at, 0 for rerun).
type RunOpts struct {
	Job string // required
	// Trigger defaults to schedule for a run with a slot, manual for one without.
	Trigger string
	// Status defaults to queued, a manual run's first status.
	Status string
	// ScheduledAt is the slot; the run's id (and partition) is its day, else CreatedAt's.
	ScheduledAt time.Time
	CreatedAt   time.Time
	StartedAt   time.Time
	FinishedAt  time.Time
	InstanceID  string
	Epoch       *int64
	Stats       json.RawMessage
	Params      json.RawMessage
	Error       string
	Reason      string
	// RecoversRunID names the abandoned run a recovery run re-runs.
	RecoversRunID     int64
	CancelRequested   bool
	DefinitionVersion int64
	Rerun             int
	NextAttemptAt     time.Time
	// The callback columns of a run that waits for its target's completion call.
	CallbackTokenHash        []byte
	CallbackAcceptedAt       time.Time
	CallbackHeartbeatAt      time.Time
	CallbackHeartbeatTimeout time.Duration
	CallbackDeadline         time.Time
	// Partition is the run's partition_id (0, the coordinator's, by default).
	Partition int
}

// Run inserts one run and returns it as stored; the test fails on an error.
func Run(ctx context.Context, t testing.TB, db DBTX, o RunOpts) *store.Run {
	t.Helper()
	return Runs(ctx, t, db, o)[0]
}

// Runs inserts runs in one statement, ids in the order given, and returns them as stored;
// the test fails on an error.
func Runs(ctx context.Context, t testing.TB, db DBTX, opts ...RunOpts) []*store.Run {
	t.Helper()
	runs, err := InsertRuns(ctx, db, opts...)
	if err != nil {
		t.Fatalf("storetest: insert %d runs: %v", len(opts), err)
	}
	return runs
}

// InsertRuns is Runs for a test that expects the insert to fail (a check, a bound): it
// returns the error. The day partitions the runs need are created first, as the leader
// does before it claims a slot of a day nobody created (Tx.AddRunDaysFor).
func InsertRuns(ctx context.Context, db DBTX, opts ...RunOpts) ([]*store.Run, error) {
	return insertRuns(ctx, db, "", opts)
}

// RunsUnlessTaken is Runs for history seeded beside a running leader, which may have
// recorded some of the slots already: a run whose slot has a row is left out (ON CONFLICT
// DO NOTHING), and only the runs stored are returned.
func RunsUnlessTaken(ctx context.Context, t testing.TB, db DBTX, opts ...RunOpts) []*store.Run {
	t.Helper()
	runs, err := insertRuns(ctx, db, "ON CONFLICT DO NOTHING", opts)
	if err != nil {
		t.Fatalf("storetest: insert %d runs: %v", len(opts), err)
	}
	return runs
}

func insertRuns(ctx context.Context, db DBTX, onConflict string, opts []RunOpts) ([]*store.Run, error) {
	var c runColumns
	for _, o := range opts {
		c.add(o)
	}
	if _, err := db.Exec(ctx, addDaysSQL, c.scheduledAt, c.createdAt); err != nil {
		return nil, err
	}
	rows, err := db.Query(ctx, fmt.Sprintf(insertRunsSQL, onConflict), c.args()...)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowToAddrOfStructByName[store.Run])
}

// addDaysSQL creates the missing day partitions of the runs' days: the same CASE as
// Tx.AddRunDaysFor, so that a day that exists costs no lock.
const addDaysSQL = `
	SELECT d FROM (SELECT DISTINCT (coalesce(s, c, now()) AT TIME ZONE 'UTC')::date AS d
	               FROM unnest($1::timestamptz[], $2::timestamptz[]) AS u (s, c)) AS days
	WHERE CASE WHEN (d::timestamp AT TIME ZONE 'UTC') >= job_run_cutover()
	            AND to_regclass('job_runs_p' || to_char(d, 'YYYYMMDD')) IS NULL
	      THEN scheduler_add_run_day(d) ELSE false END`

// insertRunsSQL draws each id with job_run_id of the run's slot, else of its creation, as
// the claims and the manual runs of production do.
const insertRunsSQL = `
	INSERT INTO job_runs (id, job, trigger, status, scheduled_at, created_at, started_at, finished_at,
	                      instance_id, epoch, stats, error, reason, params, recovers_run_id, cancel_requested,
	                      definition_version, rerun, next_attempt_at, callback_token_hash, callback_accepted_at,
	                      callback_heartbeat_at, callback_heartbeat_timeout, callback_deadline, partition_id)
	SELECT job_run_id(coalesce(scheduled_at, created_at, now())), job, trigger, status, scheduled_at,
	       coalesce(created_at, now()), started_at, finished_at, instance_id, epoch, coalesce(stats, '{}'),
	       error, reason, coalesce(params, '{}'), recovers_run_id, cancel_requested, definition_version,
	       rerun, next_attempt_at, cb_hash, cb_accepted_at, cb_heartbeat_at,
	       cb_timeout_us * interval '1 microsecond', cb_deadline, partition_id
	FROM unnest($1::text[], $2::text[], $3::text[], $4::timestamptz[], $5::timestamptz[], $6::timestamptz[],
	            $7::timestamptz[], $8::text[], $9::bigint[], $10::jsonb[], $11::text[], $12::text[], $13::jsonb[],
	            $14::bigint[], $15::boolean[], $16::bigint[], $17::int[], $18::timestamptz[], $19::bytea[],
	            $20::timestamptz[], $21::timestamptz[], $22::bigint[], $23::timestamptz[], $24::int[])
	     WITH ORDINALITY AS r (job, trigger, status, scheduled_at, created_at, started_at, finished_at,
	                           instance_id, epoch, stats, error, reason, params, recovers_run_id, cancel_requested,
	                           definition_version, rerun, next_attempt_at, cb_hash, cb_accepted_at,
	                           cb_heartbeat_at, cb_timeout_us, cb_deadline, partition_id, n)
	ORDER BY n
	%s
	RETURNING id, job, trigger, status, scheduled_at, created_at, started_at, finished_at, instance_id, epoch,
	          stats, error, reason, params, recovers_run_id, cancel_requested, definition_version, rerun, next_attempt_at,
	          traceparent`

// runColumns holds the runs column by column, for unnest: one statement for any number.
type runColumns struct {
	job, trigger, status                               []string
	scheduledAt, createdAt, startedAt, finishedAt      []*time.Time
	instanceID, errors, reasons                        []*string
	epoch, recovers, definitionVersion                 []*int64
	stats, params                                      []*string
	cancelRequested                                    []bool
	rerun                                              []int32
	nextAttemptAt, cbAccepted, cbHeartbeat, cbDeadline []*time.Time
	cbHash                                             [][]byte
	cbTimeoutUS                                        []*int64
	partition                                          []int32
}

func (c *runColumns) add(o RunOpts) {
	trigger, status := o.Trigger, o.Status
	if trigger == "" {
		trigger = store.TriggerManual
		if !o.ScheduledAt.IsZero() {
			trigger = store.TriggerSchedule
		}
	}
	if status == "" {
		status = store.StatusQueued
	}
	c.job = append(c.job, o.Job)
	c.trigger = append(c.trigger, trigger)
	c.status = append(c.status, status)
	c.scheduledAt = append(c.scheduledAt, at(o.ScheduledAt))
	c.createdAt = append(c.createdAt, at(o.CreatedAt))
	c.startedAt = append(c.startedAt, at(o.StartedAt))
	c.finishedAt = append(c.finishedAt, at(o.FinishedAt))
	c.instanceID = append(c.instanceID, text(o.InstanceID))
	c.epoch = append(c.epoch, o.Epoch)
	c.stats = append(c.stats, text(string(o.Stats)))
	c.errors = append(c.errors, text(o.Error))
	c.reasons = append(c.reasons, text(o.Reason))
	c.params = append(c.params, text(string(o.Params)))
	c.recovers = append(c.recovers, number(o.RecoversRunID))
	c.cancelRequested = append(c.cancelRequested, o.CancelRequested)
	c.definitionVersion = append(c.definitionVersion, number(o.DefinitionVersion))
	c.rerun = append(c.rerun, int32(o.Rerun))
	c.nextAttemptAt = append(c.nextAttemptAt, at(o.NextAttemptAt))
	c.cbHash = append(c.cbHash, o.CallbackTokenHash)
	c.cbAccepted = append(c.cbAccepted, at(o.CallbackAcceptedAt))
	c.cbHeartbeat = append(c.cbHeartbeat, at(o.CallbackHeartbeatAt))
	c.cbTimeoutUS = append(c.cbTimeoutUS, number(o.CallbackHeartbeatTimeout.Microseconds()))
	c.cbDeadline = append(c.cbDeadline, at(o.CallbackDeadline))
	c.partition = append(c.partition, int32(o.Partition))
}

func (c *runColumns) args() []any {
	return []any{c.job, c.trigger, c.status, c.scheduledAt, c.createdAt, c.startedAt, c.finishedAt,
		c.instanceID, c.epoch, c.stats, c.errors, c.reasons, c.params, c.recovers, c.cancelRequested,
		c.definitionVersion, c.rerun, c.nextAttemptAt, c.cbHash, c.cbAccepted, c.cbHeartbeat,
		c.cbTimeoutUS, c.cbDeadline, c.partition}
}

func at(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}

func text(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func number(n int64) *int64 {
	if n == 0 {
		return nil
	}
	return &n
}
