package engine

import (
	"context"
	"sync"
)

// A run's contexts. A claimed run waiting for a place in the gate holds none: they are made
// as its body begins (execution.contexts), and a cancel requested meanwhile is kept by its
// runCancel. A slot's 30 000 waiting runs held about 2 KB of contexts each.

// contexts makes the run's contexts as its body begins, from ctx (the term's, with the
// run's values): runCtx, which a cancel request or the run's end cancels, and startCtx,
// runCtx until the body begins, which also ends when the term stops starting runs. A
// runtime job's runCtx ends with the term's RunsCtx, not with ctx, and its end is recorded
// under a context that does too (x.ctx). stop releases them.
func (x *execution) contexts(ctx context.Context, c *runCancel) (runCtx, startCtx context.Context, stop func()) {
	stopOutliving := func() {}
	if x.en.def != nil {
		// ctx's values, with the end of the term's runs instead of ctx's own.
		ctx, stopOutliving = endsWith(context.WithoutCancel(ctx), x.term.RunsCtx(), nil)
		x.ctx = ctx
	}
	runCtx, cancel := context.WithCancelCause(ctx)
	startCtx, stopStart := endsWith(runCtx, x.term.Ctx, errTermStopped)
	c.began(cancel)
	return runCtx, startCtx, func() {
		stopStart()
		cancel(nil)
		stopOutliving()
	}
}

// runCancel cancels a run before and after its body made its contexts. A cancel requested
// while the run waits for a place is kept, and takes the run out of the gate's queue: it
// runs at once, outside the bound, sees the cancel as it begins and ends cancelled without
// doing its work.
type runCancel struct {
	mu     sync.Mutex
	cause  error                   // a cancel requested before the body began
	cancel context.CancelCauseFunc // the body's, once it began
	leave  func()                  // takes the body out of the gate's queue (Gate.Go)
}

// Cancel is the run's tracked cancel (Engine.track).
func (c *runCancel) Cancel(cause error) {
	c.mu.Lock()
	if cancel := c.cancel; cancel != nil {
		c.mu.Unlock()
		cancel(cause)
		return
	}
	if c.cause == nil {
		c.cause = cause
	}
	leave := c.leave
	c.mu.Unlock()
	if leave != nil {
		// The body runs in the caller's goroutine when it leaves the queue; the callers hold
		// the engine's lock.
		go leave()
	}
}

// waiting keeps leave, which takes the waiting body out of the gate's queue (nil: the body
// did not wait), and calls it for a cancel already requested.
func (c *runCancel) waiting(leave func()) {
	if leave == nil {
		return
	}
	c.mu.Lock()
	c.leave = leave
	requested := c.cause != nil && c.cancel == nil
	c.mu.Unlock()
	if requested {
		go leave()
	}
}

// began hands the body's cancel over, and applies a cancel requested while it waited.
func (c *runCancel) began(cancel context.CancelCauseFunc) {
	c.mu.Lock()
	c.cancel = cancel
	cause := c.cause
	c.mu.Unlock()
	if cause != nil {
		cancel(cause)
	}
}

// endsWith returns a child of ctx that also ends when also ends, with cause (nil: also's
// own cause), and the func that releases it. When also has ended already, the child has
// too when endsWith returns (AfterFunc would end it in a goroutine of its own, later).
func endsWith(ctx, also context.Context, cause error) (context.Context, func()) {
	out, cancel := context.WithCancelCause(ctx)
	end := func() {
		if cause == nil {
			cancel(context.Cause(also))
			return
		}
		cancel(cause)
	}
	if also.Err() != nil {
		end()
		return out, func() { cancel(nil) }
	}
	stop := context.AfterFunc(also, end)
	return out, func() {
		stop()
		cancel(nil)
	}
}
