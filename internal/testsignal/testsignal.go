// Package testsignal lets a component report its events so that tests await exactly the
// event they need instead of sleeping (River's testSignals). A Signal costs nothing in
// production: until a test calls Init, Send drops the value.
package testsignal

import "time"

// T is the part of testing.TB that Await needs; the package does not import testing because
// production code links it.
type T interface {
	Helper()
	Fatalf(format string, args ...any)
}

// Signal is one kind of event carrying a V.
type Signal[V any] struct{ ch chan V }

// Init makes the signal record events; tests call it before starting the component.
func (s *Signal[V]) Init() { s.ch = make(chan V, 1000) }

// Send records v without ever blocking the component.
func (s *Signal[V]) Send(v V) {
	if s.ch == nil {
		return
	}
	select {
	case s.ch <- v:
	default:
	}
}

// C returns the recorded events.
func (s *Signal[V]) C() <-chan V { return s.ch }

// Await returns the next event, failing the test after timeout.
func (s *Signal[V]) Await(t T, timeout time.Duration, what string) V {
	t.Helper()
	select {
	case v := <-s.ch:
		return v
	case <-time.After(timeout):
		t.Fatalf("timed out after %s waiting for %s", timeout, what)
		panic("unreachable")
	}
}
