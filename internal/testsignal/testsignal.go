// Package testsignal lets a component report its events so that tests await exactly the
// event they need instead of sleeping (River's testSignals). A Signal costs nothing in
// production: until a test calls Init, Send drops the value.
package testsignal

import (
	"testing"
	"time"
)

// Signal is one kind of event carrying a T.
type Signal[T any] struct{ ch chan T }

// Init makes the signal record events; tests call it before starting the component.
func (s *Signal[T]) Init() { s.ch = make(chan T, 1000) }

// Send records v without ever blocking the component.
func (s *Signal[T]) Send(v T) {
	if s.ch == nil {
		return
	}
	select {
	case s.ch <- v:
	default:
	}
}

// C returns the recorded events.
func (s *Signal[T]) C() <-chan T { return s.ch }

// Await returns the next event, failing the test after timeout.
func (s *Signal[T]) Await(t testing.TB, timeout time.Duration, what string) T {
	t.Helper()
	select {
	case v := <-s.ch:
		return v
	case <-time.After(timeout):
		t.Fatalf("timed out after %s waiting for %s", timeout, what)
		panic("unreachable")
	}
}
