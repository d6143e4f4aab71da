package engine

import (
	"context"
	"time"

	"github.com/schedulerhq/scheduler/internal/backoff"
)

// A run claimed ahead of its slot (timers.go) is started when its claim commits and waits
// in its own goroutine until the slot has come, by the database's clock.

// awaitSlot waits, for a run claimed ahead, until its slot has come, and then counts the
// run's time from there; it returns what ended runCtx first, if anything did.
func (x *execution) awaitSlot(runCtx context.Context) error {
	if runCtx.Err() != nil {
		return context.Cause(runCtx) // ended while the run waited for its place
	}
	wait := time.Until(x.notBefore)
	if wait <= 0 {
		return nil
	}
	growStack(0)
	if !backoff.Sleep(runCtx, wait) {
		return context.Cause(runCtx)
	}
	x.started = time.Now()
	return nil
}

// bodyStart is when the run's body may begin: now, or the slot of a run claimed ahead that
// has not come yet.
func (x *execution) bodyStart() time.Time {
	if now := time.Now(); now.After(x.notBefore) {
		return now
	}
	return x.notBefore
}

// growStack grows the calling goroutine's stack to 8 KiB, about what a run's call needs,
// without doing anything else. A run claimed ahead calls it before waiting for its slot:
// otherwise the 10 000 runs of one slot grew their stacks at the slot, all at once, a
// third of the leader's CPU per run (runtime.newstack in the scale bench's profile).
//
//go:noinline
func growStack(i int) byte {
	var pad [5 << 10]byte
	return pad[i]
}

// startDelay is how late the body of a scheduled run begins after its slot: for a run
// claimed ahead, now against the slot (its started_at is the slot); for any other, its
// started_at, less a jittered job's offset (it starts late on purpose), plus its wait for a
// place in the replica's bound (started_at is the claim's).
func (x *execution) startDelay() time.Duration {
	run := x.run
	switch {
	case run.ScheduledAt == nil:
		return 0
	case !x.notBefore.IsZero():
		return time.Since(x.notBefore)
	}
	delay := run.StartedAt.Sub(*run.ScheduledAt) + x.gated
	if x.en.def != nil {
		delay -= x.en.def.Offset()
	}
	return delay
}
