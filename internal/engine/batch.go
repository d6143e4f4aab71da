package engine

import "context"

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

// gather waits for a request and takes the others already waiting, up to limit; it returns
// nil once ctx ends.
func gather[R any](ctx context.Context, requests <-chan R, limit int) []R {
	var batch []R
	select {
	case <-ctx.Done():
		return nil
	case r := <-requests:
		batch = append(batch, r)
	}
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
