// Package jobcontract is the contract between the run engine and the code it runs: what a job is
// (Job: a name, a default schedule and limits, and Run), what a run gives it (Env: the
// fenced transactions, the read-only pool, the run's logger, clock and params) and what it
// gives back (Stats); the Registry of the jobs a replica knows; and the pieces every job
// body shares to stay correct when two copies of it run at once: the batch walker (Walk),
// the per-entity try-locks it takes (TryLockAll), and the recovery of a panic on any
// goroutine that runs job code (CatchPanic).
//
// It is a package of its own so that the engine, which needs only this contract, compiles
// none of the business jobs (internal/jobs): whoever assembles a replica builds them and
// hands the engine a Registry. Its names are read with the package's: job.Job, job.Env,
// job.Stats, job.Walk.
package jobcontract

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/schedulerhq/scheduler/internal/config"
	"github.com/schedulerhq/scheduler/internal/store"
)

// Job is one business job.
type Job interface {
	// Name is the job's public name (docs/design.md's job table): plan-change, status-sync, ...
	Name() string
	// Defaults are the schedule and limits used unless SCHEDULER_JOB_<NAME>_* overrides them.
	Defaults() Defaults
	// Run does one run's work and returns its counts. It must honour ctx (cancelled on
	// timeout, cancel request or loss of leadership) and write only through env.Tx.
	Run(ctx context.Context, env *Env) (Stats, error)
}

// Querier runs read queries: store.DB.ReadOnly's pool in a run, a *pgxpool.Pool or a pgx.Tx
// in tests.
type Querier = store.Reader

// Defaults is a job's default schedule (UTC cron, see internal/schedule) and limits: config's one
// defaults type. A job leaves Name empty; Registry.Defaults fills it from Name().
type Defaults = config.JobDefaults

// Env is what a run gives a job body.
type Env struct {
	RunID int64
	// Tx runs fn in a transaction fenced by the run's epoch: it fails with store.ErrNotLeader,
	// committing nothing, once this replica has been deposed.
	Tx func(ctx context.Context, fn func(pgx.Tx) error) error
	// ReadOnly is for reads outside the fence (streaming candidate ids). Its sessions are
	// read-only on the server, so a write through it fails (SQLSTATE 25006) instead of
	// committing without the epoch check; writes go through Tx.
	ReadOnly Querier
	// Log carries run_id, job, epoch and instance_id on every line.
	Log *slog.Logger
	// Now is the run's clock; tests inject a fixed one, production uses the database's now()
	// taken when the run starts.
	Now time.Time
	// Params are the run's parameters from a manual trigger ({} for scheduled runs).
	Params Params
	// Call is what a runtime job's run needs besides; a built-in job is given none. What one
	// job alone needs otherwise comes through its constructor (data-retention's RunDays).
	Call Call
}

// Call is what the engine gives a runtime job's run (internal/runtimejob/runtime.go), and only
// it: it moves with the runtime jobs.
type Call struct {
	// IdempotencyKey names the slot (or the manual run) the run does: the same for every
	// attempt, and for the recovery run after a failover.
	IdempotencyKey string
	// ScheduledAt is the slot's time; zero for a manual run.
	ScheduledAt time.Time
	// Deadline is when the next slot is due: the retries of a slot end before it. Zero for a
	// manual run, which only its timeout bounds.
	Deadline time.Time
	// RecordAttempt records one attempt of an outbound call with the run.
	RecordAttempt func(ctx context.Context, a store.Attempt) error
	// RecordNextAttempt records, fenced, when the call's next attempt starts while it waits
	// out a backoff; nil when the wait is over.
	RecordNextAttempt func(ctx context.Context, at *time.Time) error
	// RecordBackend records, fenced, the backend a SQL run has in its target before its
	// statements run (a later leader ends it if this one dies); ForgetBackend drops the
	// record once the backend ended with the run.
	RecordBackend func(ctx context.Context, b store.SQLBackend) error
	ForgetBackend func(ctx context.Context)
	// Callback is set for the run of a callback job (nil otherwise): the URL the target
	// posts the outcome to and the run's token, sent with the call and nowhere else.
	Callback *Callback
}

// Callback is how a callback job's target reaches its run.
type Callback struct {
	URL, Token string
}

// Params are what a manual trigger may pass to a job.
type Params struct {
	// DryRun counts what the run would change and changes nothing.
	DryRun bool `json:"dry_run,omitempty"`
	// Vars are a SQL job's inputs: its statements read current_setting('scheduler.var.<name>').
	Vars map[string]string `json:"vars,omitempty"`
	// Body replaces an HTTP job's request body for this run; Headers are added to (or
	// replace) its headers. The scheduler's own headers cannot be given (api checks).
	Body    *string           `json:"body,omitempty"`
	Headers map[string]string `json:"headers,omitempty"`
}

// ParseParams decodes a run's params, refusing unknown fields.
func ParseParams(raw json.RawMessage) (Params, error) {
	var p Params
	if len(raw) == 0 {
		return p, nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	err := dec.Decode(&p)
	return p, err
}

// Stats are a run's counts, stored in job_runs.stats.
type Stats struct {
	Processed     int64 `json:"processed"`
	Changed       int64 `json:"changed"`
	SkippedLocked int64 `json:"skipped_locked"`
	Errors        int64 `json:"errors"`
	// Detail holds job-specific counts: per tenant, per table, per outcome.
	Detail map[string]int64 `json:"detail,omitempty"`
}

// Add adds o's counts to s.
func (s *Stats) Add(o Stats) {
	s.Processed += o.Processed
	s.Changed += o.Changed
	s.SkippedLocked += o.SkippedLocked
	s.Errors += o.Errors
	for k, v := range o.Detail {
		s.Count(k, v)
	}
}

// Count adds n to the job-specific counter key.
func (s *Stats) Count(key string, n int64) {
	if s.Detail == nil {
		s.Detail = map[string]int64{}
	}
	s.Detail[key] += n
}
