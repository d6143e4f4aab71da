// Package backoff spaces the retries of something that failed because a peer is away (the
// database down, a connection dropped): exponential delays, capped, with jitter, so that
// replicas which lost PostgreSQL together do not come back in lockstep, and a long outage
// does not flood the log.
//
// It is a few lines of arithmetic rather than a dependency. Retry is the loop of the callers
// that retry while their context (a term, the process) lasts, with no budget: the engine's writes
// while it leads and the elector's reconnect say only what they retry, what ends it (Stop),
// and what they log before a delay. The callers whose loop differs use New and Sleep: the
// webhook sender, which stops after its attempts or a permanent error, and serve's wait for
// the database to migrate, which counts its attempts in the log.
package backoff

import (
	"context"
	"errors"
	"math/rand/v2"
	"time"
)

// ErrAgain, returned by Retry's op, calls op again at once, without a delay and without
// counting a failure: op already waited for what it needed (a run to end, a clock).
var ErrAgain = errors.New("backoff: again")

// stop marks an error that ends Retry.
type stop struct{ err error }

func (s stop) Error() string { return s.err.Error() }
func (s stop) Unwrap() error { return s.err }

// Stop wraps err so that Retry returns it (unwrapped) instead of retrying.
func Stop(err error) error { return stop{err} }

// Retry calls op until it returns nil, ctx ends, or op's error is a Stop, and returns nil,
// ctx's error or the stopping error. After any other error it asks onRetry, with the error
// and the delay it is about to wait (drawn from min to max, as New's): onRetry logs, and
// may give up by returning an error, which Retry returns.
func Retry(ctx context.Context, min, max time.Duration, op func() error, onRetry func(err error, d time.Duration) error) error {
	b := New(min, max)
	for {
		err := op()
		var s stop
		switch {
		case err == nil:
			return nil
		case errors.As(err, &s):
			return s.err
		case ctx.Err() != nil:
			return ctx.Err()
		case errors.Is(err, ErrAgain):
			continue
		}
		d := b.Next()
		if err := onRetry(err, d); err != nil {
			return err
		}
		if !Sleep(ctx, d) {
			return ctx.Err()
		}
	}
}

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
