package engine

// testSignals let tests await the engine's events instead of sleeping. They are nil
// channels, costing nothing, unless a test calls init.
type testSignals struct {
	leading     testSignal[int64] // a term's recovery and catch-up are done and timers run
	finished    testSignal[int64] // a run's end was recorded
	interrupted testSignal[int64] // a run was left for the next leader
}

func (s *testSignals) init() {
	s.leading.init()
	s.finished.init()
	s.interrupted.init()
}

type testSignal[T any] struct{ ch chan T }

func (s *testSignal[T]) init() { s.ch = make(chan T, 1000) }

func (s *testSignal[T]) signal(v T) {
	if s.ch == nil {
		return
	}
	select {
	case s.ch <- v:
	default:
	}
}
