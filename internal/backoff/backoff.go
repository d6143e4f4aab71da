// Package backoff spaces the retries of something that failed because a peer is away (the
// database down, a connection dropped): exponential delays, capped, with jitter, so that
// replicas which lost PostgreSQL together do not come back in lockstep, and a long outage
// does not flood the log.
//
// It is a dozen lines of arithmetic rather than a dependency: every caller here retries
// until its context ends, so it needs no retry budget, no error classification and no
// operation wrapper, only "how long until the next attempt" and a sleep that honours ctx.
package backoff

import (
	"context"
	"math/rand/v2"
	"time"
)

// Backoff yields the delays before successive retries: Min, then doubling up to Max, each
// drawn at random from its upper half ("equal jitter": never shorter than half the step,
// so a retry_in logged beforehand stays meaningful). Not safe for concurrent use; each
// retry loop has its own.
type Backoff struct {
	Min, Max time.Duration
	attempt  int
}

// New returns a Backoff from min to max.
func New(min, max time.Duration) *Backoff {
	return &Backoff{Min: min, Max: max}
}

// Next returns the delay before the next retry and counts the attempt.
func (b *Backoff) Next() time.Duration {
	d := b.Max
	if b.attempt < 30 { // beyond that the shift overflows; Max has long been reached
		d = min(b.Min<<b.attempt, b.Max)
	}
	b.attempt++
	if d <= 1 {
		return d
	}
	half := d / 2
	return half + rand.N(d-half+1)
}

// Reset starts over from Min, after a success.
func (b *Backoff) Reset() { b.attempt = 0 }

// Sleep waits for the next delay or until ctx ends; false means ctx ended.
func (b *Backoff) Sleep(ctx context.Context) bool {
	return Sleep(ctx, b.Next())
}

// Sleep waits for d or until ctx ends; false means ctx ended.
func Sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
