package leader

// testSignals let tests await the elector's events instead of sleeping (as River's). They
// are nil channels, and so cost nothing, unless a test calls init.
type testSignals struct {
	lockAcquired     testSignal[struct{}]
	gainedLeadership testSignal[int64]
	lostLeadership   testSignal[int64]
}

func (s *testSignals) init() {
	s.lockAcquired.init()
	s.gainedLeadership.init()
	s.lostLeadership.init()
}

type testSignal[T any] struct{ ch chan T }

func (s *testSignal[T]) init() { s.ch = make(chan T, 100) }

// signal records v without ever blocking the elector.
func (s *testSignal[T]) signal(v T) {
	if s.ch == nil {
		return
	}
	select {
	case s.ch <- v:
	default:
	}
}
