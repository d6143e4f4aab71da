// Package testsignal lets a component report its events so that tests await exactly the
// event they need instead of sleeping (River's testSignals). A Signal costs nothing in
// production: until a test calls Init, Send drops the value.
package testsignal

import (
	"sync/atomic"
	"time"
)

// T is the part of testing.TB that Await needs; the package does not import testing because
// production code links it.
type T interface {
	Helper()
	Fatalf(format string, args ...any)
}

// capacity is how many events a signal holds for a test that has not read them yet.
const capacity = 1000

// Signal is one kind of event carrying a V.
type Signal[V any] struct {
	ch chan V
	// dropped counts the events Send could not record because the test left the signal
	// full: a test awaiting one of them would wait in vain, so Await fails instead.
	dropped atomic.Int64
}

// Init makes the signal record events; tests call it before starting the component.
func (s *Signal[V]) Init() { s.ch = make(chan V, capacity) }

// Send records v without ever blocking the component; an event that does not fit is
// counted as dropped.
func (s *Signal[V]) Send(v V) {
	if s.ch == nil {
		return
	}
	select {
	case s.ch <- v:
	default:
		s.dropped.Add(1)
	}
}

// C returns the recorded events.
func (s *Signal[V]) C() <-chan V { return s.ch }

// Await returns the next event, failing the test after timeout, or at once when events were
// dropped because the test let the signal fill up (it should drain C, or Init later).
func (s *Signal[V]) Await(t T, timeout time.Duration, what string) V {
	t.Helper()
	s.failIfDropped(t, what)
	select {
	case v := <-s.ch:
		return v
	case <-time.After(timeout):
		s.failIfDropped(t, what)
		t.Fatalf("timed out after %s waiting for %s", timeout, what)
		panic("unreachable")
	}
}

func (s *Signal[V]) failIfDropped(t T, what string) {
	t.Helper()
	if n := s.dropped.Load(); n > 0 {
		t.Fatalf("waiting for %s: %d events were dropped because the signal held %d unread ones; "+
			"drain it with C() between waits", what, n, capacity)
	}
}
