package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/schedulerhq/scheduler/internal/jobcontract"
	"github.com/schedulerhq/scheduler/internal/leader"
	"github.com/schedulerhq/scheduler/internal/logging"
	"github.com/schedulerhq/scheduler/internal/runend"
	"github.com/schedulerhq/scheduler/internal/store"
	"github.com/schedulerhq/scheduler/internal/tracing"
)

// Causes of a run's context ending, which decide its final status.
var (
	errTimedOut        = errors.New("the run exceeded its maximum runtime")
	errCancelRequested = errors.New("cancel requested")
	// errTermStopped ends a run whose term stopped starting runs before its body began: it
	// is left to the next holder's recovery, which makes it (nothing was called yet).
	errTermStopped = errors.New("the term stopped starting runs before the run's body began")
)

// finishAfterTermTimeout bounds recording the end of a run that finished as its term ended.
const finishAfterTermTimeout = 5 * time.Second

// statusInterrupted labels, in metrics only, a run this replica could not finish because it
// lost leadership; job_runs keeps it running until the next leader marks it abandoned.
const statusInterrupted = "interrupted"

// maxStoredStack bounds the panic stack kept in job_runs.error: the frames that matter (the
// job's, where it panicked) come first, and a run row should stay small.
const maxStoredStack = 4 << 10

// errorText is what job_runs.error records for runErr (nil when the run succeeded): its
// message and, for a panic, the start of its stack, so the operator reading the run over
// the API sees where the job failed without searching the logs.
func errorText(runErr error) *string {
	if runErr == nil {
		return nil
	}
	s := runErr.Error()
	var pe *jobcontract.PanicError
	if errors.As(runErr, &pe) {
		stack := pe.Stack
		if len(stack) > maxStoredStack {
			stack = append(stack[:maxStoredStack:maxStoredStack], "\n... (truncated; the full stack is in the log)"...)
		}
		// A cut can split a character; PostgreSQL refuses invalid UTF-8.
		s += "\n\n" + strings.ToValidUTF8(string(stack), "")
	}
	return &s
}

// start runs a claimed (status running) run in its own goroutine. The run is owned (in
// e.running) before start returns, while the caller still holds claiming, and until its
// end is recorded: the rescuer never takes it for an orphan.
func (e *Engine) start(ctx context.Context, term leader.Term, en *entry, run *store.Run) {
	e.startAt(ctx, term, en, run, time.Time{})
}

// startAt is start for a run claimed ahead of its slot: its body begins at notBefore, when
// the slot has come by the database's clock (store.ClaimOutcome.StartIn).
//
// A runtime job's run ends with its term's RunsCtx, not with ctx (the term's Ctx or a
// child): a term given up starts nothing more, but gives a call or statement in flight a
// grace to finish and record its end under the term, where cut it would be made again,
// under the same key, by the next holder's recovery. A run whose body has not begun (waiting for a place
// or for its slot) stops with the term's Ctx, and that recovery makes it. A built-in job's
// run stops with the term's Ctx: its body gives back at once what it has not sent.
func (e *Engine) startAt(ctx context.Context, term leader.Term, en *entry, run *store.Run, notBefore time.Time) {
	ctx, span := e.traceRun(ctx, term.Epoch, run)
	c := &runCancel{}
	e.track(run, c.Cancel)
	e.runs.Add(1)
	// A resignation keeps the lock until the run has recorded what it did.
	release := term.Hold()
	x := e.newExecution(ctx, term, en, run)
	x.notBefore = notBefore
	// The body waits for a place of the replica's bound as a value, not a goroutine, and
	// without contexts of its own (runctx.go). The run stays owned (tracked, held)
	// meanwhile, and its end is recorded as any other's. Not begun, a built-in job's run
	// stops with ctx, a runtime job's with the term's Ctx (ctx may be a child of it).
	waitCtx := ctx
	if en.def != nil {
		waitCtx = term.Ctx
	}
	c.waiting(e.conf.Gate.Go(waitCtx, en.gateNamespace(), func(releasePlace func()) {
		x.logged(ctx)
		x.releasePlace = releasePlace
		defer e.runs.Done()
		defer release()
		defer e.untrack(run.ID)
		defer endRun(span, x)
		runCtx, startCtx, stop := x.contexts(ctx, c)
		defer stop()
		x.execute(runCtx, startCtx)
	}))
}

// execution is one run on this replica, from its start to its recorded end. It holds what
// every phase needs, so the phases are its methods rather than functions of nine arguments.
type execution struct {
	e *Engine
	// ctx is the term's: the run's end is recorded under it, not under the run's own
	// context, which its timeout or a cancel ends.
	ctx     context.Context
	term    leader.Term
	en      *entry // nil for a queued run of a job this replica does not know
	run     *store.Run
	log     *slog.Logger
	started time.Time
	// notBefore, when set, is when the body may begin: the slot of a run claimed ahead.
	notBefore time.Time
	// gated is how long the run waited for a place in the replica's bound (bodies.go).
	gated time.Duration

	// version is the definition version recorded with the run's end.
	version *int64
	// status is the final status, once finish decided it.
	status string
	// pending are call attempts recorded with the run's end rather than on their own.
	pending []store.Attempt
	// rules: what the job says about its runs' ends, decided with the run's end.
	rules runend.Rules
	// releasePlace gives the run's place in the replica's bound up (Gate.Go) once its body
	// is done and only the record of its end is left; nil outside the gate.
	releasePlace func()
}

// newExecution is the run's execution, without its logger (logged).
func (e *Engine) newExecution(ctx context.Context, term leader.Term, en *entry, run *store.Run) *execution {
	x := &execution{e: e, ctx: ctx, term: term, en: en, run: run, started: time.Now()}
	if en != nil {
		x.version, x.rules = en.versionRef(), en.endRules()
	}
	return x
}

// logged gives x its logger, with the run's id, job, epoch, trigger and trace, and returns
// x. A claimed run gets it as its body begins, not while it waits for its slot or its place:
// the logger's attributes, formatted once, are half a kilobyte a run, and a replica of a
// 100 000-job cluster has 33 000 runs waiting at each slot.
func (x *execution) logged(ctx context.Context) *execution {
	x.log = x.e.runLog(x.term, x.run).With(tracing.LogAttrs(ctx)...)
	return x
}

// execute runs the job body under the job's timeout and runCtx, which the queue cancels on
// request, then finishes the run under the term's ctx. startCtx is runCtx until the body
// begins, which also ends when the term stops starting runs.
func (x *execution) execute(runCtx, startCtx context.Context) {
	e, en, run := x.e, x.en, x.run
	// The run's time counts from its place in the gate, not from its claim.
	x.gated, x.started = time.Since(x.started), time.Now()
	// The timeout counts from when the body may begin: the slot, for a run claimed ahead.
	// What does not need the slot to have come is done before it, while such a run waits:
	// when 10 000 runs share a slot, every microsecond of work after it delays the calls.
	runCtx, cancelTimeout := context.WithDeadlineCause(runCtx, x.bodyStart().Add(en.conf.Timeout), errTimedOut)
	defer cancelTimeout()
	params, paramsErr := jobcontract.ParseParams(run.Params)
	var call jobcontract.Call
	var callErr error
	if en.def != nil {
		call, callErr = x.call(runCtx)
	}
	ended := x.awaitSlot(startCtx)
	// Before anything can call finish: RunFinished lowers the running gauge RunStarted raised.
	e.conf.Metrics.RunStarted(run.Job, run.Trigger, x.startDelay())
	switch {
	case ended != nil:
		// The body never began: a term that ended leaves the run to the next leader's
		// recovery, a cancel request ends it cancelled (finish), never succeeded.
		x.finish(jobcontract.Stats{}, fmt.Errorf("the run ended before its body began: %w", ended), ended)
		return
	case paramsErr != nil:
		x.finish(jobcontract.Stats{}, fmt.Errorf("invalid params %s: %w", run.Params, paramsErr), nil)
		return
	case callErr != nil:
		x.finish(jobcontract.Stats{}, callErr, nil)
		return
	}
	env := &jobcontract.Env{
		RunID: run.ID,
		Tx: func(ctx context.Context, fn func(pgx.Tx) error) error {
			return e.conf.DB.Fenced(ctx, x.term.Fence(), func(tx *store.Tx) error { return fn(tx) })
		},
		ReadOnly: e.conf.DB.ReadOnly(),
		Log:      x.log,
		Now:      *run.StartedAt,
		Params:   params,
		Call:     call,
	}
	if en.def != nil && en.def.IsCallback() && !params.DryRun {
		var err error
		if env.Call.Callback, err = x.armCallback(runCtx); err != nil {
			x.finish(jobcontract.Stats{}, err, nil)
			return
		}
	}
	x.log.Info("run started", "timeout", en.conf.Timeout, "dry_run", params.DryRun)
	stats, runErr := runJob(runCtx, en.job, env)
	var cause error
	if runCtx.Err() != nil {
		cause = context.Cause(runCtx)
	}
	if env.Call.Callback != nil && runErr == nil && cause == nil {
		// Accepted, not finished: the target completes the run (callbacks.go).
		x.accept(stats)
		return
	}
	x.finish(stats, runErr, cause)
}

// call is what a runtime job's run gets besides a built-in job's Env.
func (x *execution) call(ctx context.Context) (jobcontract.Call, error) {
	e, run, fence := x.e, x.run, x.term.Fence()
	key, slot, err := e.callKey(ctx, run)
	if err != nil {
		return jobcontract.Call{}, fmt.Errorf("deriving the run's Idempotency-Key: %w", err)
	}
	c := jobcontract.Call{IdempotencyKey: key, ScheduledAt: slot, Deadline: deadlineFor(x.en, run)}
	c.RecordAttempt = func(ctx context.Context, a store.Attempt) error {
		if a.Error == nil {
			// A successful attempt is the run's last: it is recorded with the run's end, in
			// the same transaction, so a call that works costs one commit, not two.
			x.pending = append(x.pending, a)
			return nil
		}
		return e.conf.DB.Fenced(ctx, fence, func(tx *store.Tx) error { return tx.RecordAttempt(ctx, run.ID, a) })
	}
	c.RecordNextAttempt = func(ctx context.Context, at *time.Time) error {
		return e.conf.DB.Fenced(ctx, fence, func(tx *store.Tx) error { return tx.SetNextAttempt(ctx, run.ID, at) })
	}
	c.RecordBackend = func(ctx context.Context, b store.SQLBackend) error {
		b.RunID = run.ID
		return e.conf.DB.Fenced(ctx, fence, func(tx *store.Tx) error { return tx.RecordSQLBackend(ctx, b) })
	}
	c.ForgetBackend = func(ctx context.Context) {
		// Best effort: a record left behind is taken by the next rescue, which finds its
		// backend gone.
		_ = e.conf.DB.ForgetSQLBackend(context.WithoutCancel(ctx), run.ID)
	}
	return c, nil
}

// runLog is the logger of every line about one run, the job's own lines included: one
// helper defines the run's identity (run_id, job, epoch, and instance_id from e.log).
func (e *Engine) runLog(term leader.Term, run *store.Run) *slog.Logger {
	return logging.ForRun(e.log, run.ID, run.Job, term.Epoch).With("trigger", run.Trigger)
}

// runJob calls the job body, turning a panic into an error (a *job.PanicError) so one bad
// job cannot bring the replica down. The goroutines the job starts through the job package
// (a walk's, the outbox's) recover their own panics into the error Run returns.
func runJob(ctx context.Context, j jobcontract.Job, env *jobcontract.Env) (stats jobcontract.Stats, err error) {
	err = jobcontract.CatchPanic(func() error {
		var err error
		stats, err = j.Run(ctx, env)
		return err
	})
	return stats, err
}

// finish is the one place a run ends: it decides the final status and records it in a
// fenced write, retried while this replica leads. A run interrupted by the loss of
// leadership is not finished here: this replica can no longer write, and the next leader
// marks it abandoned and recovers it. Every run that was started (RunStarted) passes here
// exactly once.
func (x *execution) finish(stats jobcontract.Stats, runErr, cause error) {
	e, run, ctx, log := x.e, x.run, x.ctx, x.log
	elapsed := time.Since(x.started)
	status := store.StatusSucceeded
	// The running gauge falls whatever happens; an interrupted run is counted as such here
	// and as abandoned by the leader that finds it.
	defer func() {
		x.status = status
		e.conf.Metrics.RunFinished(run.Job, status, run.Trigger, elapsed)
		// Signalled after the metrics, so a test awaiting the signal sees them.
		if status == statusInterrupted {
			e.testSignals.interrupted.Send(run.ID)
		} else {
			e.testSignals.finished.Send(run.ID)
		}
	}()
	if errors.Is(runErr, store.ErrNotLeader) || errors.Is(cause, errTermStopped) || (ctx.Err() != nil && runErr != nil) {
		status = statusInterrupted
		log.Warn("run interrupted by the loss of leadership; the next leader recovers it",
			"error", runErr, "elapsed", elapsed)
		return
	}
	var pe *jobcontract.PanicError
	switch {
	case errors.As(runErr, &pe):
		status = store.StatusFailed
		log.Error("job panicked", "panic", fmt.Sprint(pe.Value), "error", runErr, "stack", string(pe.Stack))
	case runErr == nil:
	case errors.Is(cause, errTimedOut):
		status = store.StatusTimedOut
		runErr = fmt.Errorf("timed out after %s: %w", elapsed.Round(time.Millisecond), runErr)
	case errors.Is(cause, errCancelRequested):
		status = store.StatusCancelled
	default:
		status = store.StatusFailed
	}
	errText := errorText(runErr)
	if ctx.Err() != nil {
		// The job finished its work just as the term ended. In a resignation the lock is
		// still held until this run returns (Term.Hold), so its end can still pass the fence:
		// recorded now, it is not run again by the next leader's recovery.
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(context.WithoutCancel(ctx), finishAfterTermTimeout)
		defer cancel()
	}
	if !x.record(ctx, status, statsJSON(stats), errText) {
		status = statusInterrupted
		return
	}
	e.conf.Metrics.Entities(run.Job, stats.Processed, stats.Changed, stats.SkippedLocked, stats.Errors)
	attrs := []any{"status", status, "elapsed", elapsed,
		"processed", stats.Processed, "changed", stats.Changed, "skipped_locked", stats.SkippedLocked, "errors", stats.Errors}
	if runErr != nil { // a succeeded run's line carries no error=<nil>
		attrs = append(attrs, "error", runErr)
	}
	log.Info("run finished", attrs...)
}

// record records the run's end, retrying with backoff while this replica leads
// (docs/design.md guarantee 10): a connection reset or a statement timeout must not leave the
// run running, which would block every later slot of its job as an overlap until the next
// election. It reports false when the term ended first.
func (x *execution) record(ctx context.Context, status string, stats json.RawMessage, errText *string) bool {
	run, log := x.run, x.log
	ended := time.Now()
	if x.releasePlace != nil {
		x.releasePlace() // the body is done: the record waits outside the bound
	}
	err := retryWhileLeading(ctx, func() error {
		err := x.e.finishes.finish(ctx, x.term.Fence(), store.Finish{RunID: run.ID, Status: status, Stats: stats,
			Error: errText, Version: x.version, Attempts: x.pending}, ended, x.rules)
		if errors.Is(err, store.ErrNotRunning) {
			// Only this goroutine finishes its run while the term lasts, so an earlier
			// attempt committed and its answer was lost.
			log.Info("the end of the run was already recorded by an earlier attempt", "status", status)
			return nil
		}
		return err
	}, func(err error, d time.Duration) error {
		log.Warn("recording the end of the run failed; retrying while this replica leads", "status", status, "error", err, "retry_in", d)
		return nil
	})
	if err != nil {
		log.Warn("recording the end of the run failed as the term ended; the next leader recovers it", "status", status, "error", err)
		return false
	}
	return true
}

func (e *Engine) track(run *store.Run, cancel context.CancelCauseFunc) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.running[run.ID] = runningRun{job: run.Job, cancel: cancel}
}

func (e *Engine) untrack(id int64) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if r, ok := e.running[id]; ok {
		if ch := e.idle[r.job]; ch != nil {
			close(ch) // a queue-one slot waiting for the job claims now
			delete(e.idle, r.job)
		}
	}
	delete(e.running, id)
}

// cancelRun cancels a running run of this replica and returns its job; false if it is not
// running here.
func (e *Engine) cancelRun(id int64) (string, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	r, ok := e.running[id]
	if ok {
		r.cancel(errCancelRequested)
	}
	return r.job, ok
}

// awaitIdle waits until a run of job ends, the poll interval passes (a queued run of the
// job may be started and finished by a path that does not signal), or ctx ends.
func (e *Engine) awaitIdle(ctx context.Context, job string) {
	e.mu.Lock()
	ch := e.idle[job]
	if ch == nil {
		ch = make(chan struct{})
		e.idle[job] = ch
	}
	e.mu.Unlock()
	timer := time.NewTimer(e.conf.PollInterval)
	defer timer.Stop()
	select {
	case <-ch:
	case <-timer.C:
	case <-ctx.Done():
	}
}

// stats, as job_runs stores them.
func statsJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		return json.RawMessage(`{}`)
	}
	return b
}
