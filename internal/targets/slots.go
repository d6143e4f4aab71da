package targets

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"
)

// errNoSlotBeforeDeadline ends a call whose turn would come only after its deadline.
var errNoSlotBeforeDeadline = errors.New("no concurrency slot came free before the run's deadline")

// slots bounds how many attempts run at once: in all, so that a burst of due jobs cannot
// exhaust the scheduler's sockets, and per host, so that one slow target cannot take every
// slot from the others, nor the scheduler flood one user's service.
type slots struct {
	global  chan struct{}
	perHost int
	waiting atomic.Int64

	mu sync.Mutex
	// hosts keeps a semaphore per host for the life of the process: hosts are bounded by
	// the number of job definitions, so this does not grow without end.
	hosts map[string]chan struct{}
}

func newSlots(global, perHost int) *slots {
	return &slots{global: make(chan struct{}, global), perHost: perHost, hosts: map[string]chan struct{}{}}
}

// acquire takes a slot for host, and one of the global ones, waiting until ctx ends or the
// deadline (zero: none) passes. The host slot is taken first: a call queued behind a busy host
// then holds nothing the calls to other hosts need.
func (s *slots) acquire(ctx context.Context, host string, deadline time.Time) (release func(), err error) {
	if !deadline.IsZero() {
		if !time.Now().Before(deadline) {
			return nil, errNoSlotBeforeDeadline
		}
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, deadline)
		defer cancel()
	}
	hostSem := s.host(host)
	if err := s.take(ctx, hostSem); err != nil {
		return nil, err
	}
	if err := s.take(ctx, s.global); err != nil {
		<-hostSem
		return nil, err
	}
	return func() { <-s.global; <-hostSem }, nil
}

func (s *slots) host(host string) chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	sem, ok := s.hosts[host]
	if !ok {
		sem = make(chan struct{}, s.perHost)
		s.hosts[host] = sem
	}
	return sem
}

func (s *slots) take(ctx context.Context, sem chan struct{}) error {
	select {
	case sem <- struct{}{}:
		return nil
	default:
	}
	s.waiting.Add(1)
	defer s.waiting.Add(-1)
	select {
	case sem <- struct{}{}:
		return nil
	case <-ctx.Done():
		if ctx.Err() == context.DeadlineExceeded {
			return errNoSlotBeforeDeadline
		}
		return ctx.Err()
	}
}
