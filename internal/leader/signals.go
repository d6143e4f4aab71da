package leader

import "github.com/schedulerhq/scheduler/internal/testsignal"

// testSignals let tests await the elector's events instead of sleeping (as River's). They
// are nil channels, and so cost nothing, unless a test calls init.
type testSignals struct {
	lockAcquired     testsignal.Signal[struct{}]
	gainedLeadership testsignal.Signal[int64]
	lostLeadership   testsignal.Signal[int64]
	heartbeat        testsignal.Signal[int64] // a leader's heartbeat succeeded, after a wait for step-down requests
	controlRead      testsignal.Signal[int]   // the leader read its control rows, after this many wake-ups
	guarded          testsignal.Signal[int]   // a check of the election's lock ended this many backends
	refused          testsignal.Signal[error] // this login may not end a backend on the election's lock

	// Partitions' (partitions.go).
	partitionElected   testsignal.Signal[int] // this replica was elected for a partition
	partitionLost      testsignal.Signal[int] // a partition term of this replica ended
	partitionTick      testsignal.Signal[int] // a heartbeat ended, holding this many partitions
	partitionTakenOver testsignal.Signal[int] // a stale holder's backend was ended for this partition
}

func (s *testSignals) init() {
	s.lockAcquired.Init()
	s.gainedLeadership.Init()
	s.lostLeadership.Init()
	s.heartbeat.Init()
	s.controlRead.Init()
	s.guarded.Init()
	s.refused.Init()
	s.partitionElected.Init()
	s.partitionLost.Init()
	s.partitionTick.Init()
	s.partitionTakenOver.Init()
}
