package engine

import (
	"context"
	"time"
)

// The claimer and the finisher turn many goroutines' single requests into batches: each
// request is sent on a channel and answered on its own done channel; a loop takes every
// request waiting and handles them in one transaction.

// submit sends r on requests and waits for its answer, both until ctx ends.
func submit[R any](ctx context.Context, requests chan<- R, r R, done <-chan error) error {
	select {
	case requests <- r:
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		// The batch may still handle r; what it decides is recorded as for any other.
		return ctx.Err()
	}
}

// gather waits for a request and takes the others that arrive until none has for linger, up
// to limit; it returns nil once ctx ends. The linger lets a burst (every job of a schedule
// firing at once, from goroutines still being started) make one batch, not a first batch of
// one and a second of the rest.
func gather[R any](ctx context.Context, requests <-chan R, limit int, linger time.Duration) []R {
	var batch []R
	select {
	case <-ctx.Done():
		return nil
	case r := <-requests:
		batch = append(batch, r)
	}
	timer := time.NewTimer(linger)
	defer timer.Stop()
	for {
		if batch = takeWaiting(requests, batch, limit); len(batch) >= limit {
			return batch
		}
		timer.Reset(linger)
		select {
		case r := <-requests:
			batch = append(batch, r)
		case <-timer.C:
			return batch
		}
	}
}

// takeWaiting adds the requests waiting on requests to batch, up to limit, without waiting.
func takeWaiting[R any](requests <-chan R, batch []R, limit int) []R {
	for len(batch) < limit {
		select {
		case r := <-requests:
			batch = append(batch, r)
		default:
			return batch
		}
	}
	return batch
}
