package targets

import (
	"context"
	"fmt"
	"maps"
	"time"
)

// A namespace's calls in flight are bounded by its max_concurrent_calls
// (scheduler_namespaces), so one team's burst of jobs cannot take every connection of the
// leader from the others. The bound is the namespace row's, which the replica reads every
// few seconds and hands over with SetNamespaceLimits: a change applies to the next call, and
// a raised bound wakes the calls waiting at once. A call waits for a slot of its namespace
// until its run's deadline (the next slot, or the run's timeout), then fails saying the
// bound was reached: never dropped silently.

// QuotaError is a call that found its namespace's bound reached until its deadline.
type QuotaError struct {
	Namespace string
	Limit     int
	// Deadline is the run's deadline the wait ran into; zero when the run's context ended it
	// (its timeout), which Err then holds.
	Deadline time.Time
	Err      error
}

func (e *QuotaError) Error() string {
	until := "before the run's timeout"
	if !e.Deadline.IsZero() {
		until = "before the run's deadline " + e.Deadline.UTC().Format(time.RFC3339) + " (the next slot)"
	}
	return fmt.Sprintf("namespace %s's max_concurrent_calls (%d) was reached: none of its calls ended %s; "+
		"an admin can raise the namespace's max_concurrent_calls, or its jobs can be spread out (jitter, other schedules)",
		e.Namespace, e.Limit, until)
}

func (e *QuotaError) Unwrap() error { return e.Err }

// SetNamespaceLimits replaces every namespace's bound on calls in flight; a namespace left
// out has none.
func (c *Caller) SetNamespaceLimits(limits map[string]int) {
	s := c.slots
	s.mu.Lock()
	defer s.mu.Unlock()
	if maps.Equal(s.limits, limits) {
		return
	}
	s.limits = maps.Clone(limits)
	s.wakeLocked() // a raised bound may let waiting calls through
}

// takeNamespace takes a slot of namespace ns's bound, waiting until ctx ends or the deadline
// (zero: none) passes; "" or a namespace without a bound takes none.
func (s *slots) takeNamespace(ctx context.Context, ns string, deadline time.Time) (release func(), err error) {
	var expired <-chan time.Time
	if !deadline.IsZero() {
		t := time.NewTimer(time.Until(deadline))
		defer t.Stop()
		expired = t.C
	}
	counted := false
	defer func() {
		if counted {
			s.mu.Lock()
			s.nsWaiting--
			s.mu.Unlock()
			s.waiting.Add(-1)
		}
	}()
	for {
		s.mu.Lock()
		limit := s.limits[ns]
		if ns == "" || limit <= 0 || s.inUse[ns] < limit {
			s.inUse[ns]++
			s.mu.Unlock()
			return func() { s.releaseNamespace(ns) }, nil
		}
		changed := s.changed
		if !counted {
			s.nsWaiting++ // under s.mu, so a release sees it and wakes this call
			s.waiting.Add(1)
			counted = true
		}
		s.mu.Unlock()
		select {
		case <-changed:
		case <-expired:
			return nil, &QuotaError{Namespace: ns, Limit: limit, Deadline: deadline}
		case <-ctx.Done():
			if ctx.Err() == context.DeadlineExceeded {
				return nil, &QuotaError{Namespace: ns, Limit: limit, Err: ctx.Err()}
			}
			return nil, ctx.Err()
		}
	}
}

func (s *slots) releaseNamespace(ns string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.inUse[ns]--; s.inUse[ns] <= 0 {
		delete(s.inUse, ns)
	}
	s.wakeLocked()
}

// wakeLocked wakes every call waiting for a namespace's slot, to look again; s.mu is held.
// Without one waiting (the usual case: no namespace at its bound) it costs nothing.
func (s *slots) wakeLocked() {
	if s.nsWaiting == 0 {
		return
	}
	close(s.changed)
	s.changed = make(chan struct{})
}
