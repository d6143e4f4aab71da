package engine

import (
	"github.com/schedulerhq/scheduler/internal/store"
	"github.com/schedulerhq/scheduler/internal/testsignal"
)

// testSignals let tests await the engine's events instead of sleeping. They are nil
// channels, costing nothing, unless a test calls init.
type testSignals struct {
	leading     testsignal.Signal[int64] // a term's recovery and catch-up are done and timers run
	stopped     testsignal.Signal[int64] // a term's leading ended: timers and services stopped, definitions dropped
	finished    testsignal.Signal[int64] // a run's end was recorded
	interrupted testsignal.Signal[int64] // a run was left for the next leader
	rescued     testsignal.Signal[int]   // a rescuer pass ended, with how many runs it abandoned
	// definitionLoaded: a runtime job's definition took effect ("name@version")
	definitionLoaded testsignal.Signal[string]
	// claimBatch: a batch of slot claims was decided, with its claims (won or not)
	claimBatch testsignal.Signal[[]store.Claim]
	// repaired: a term that found a failover started repairing, with how many slots
	repaired testsignal.Signal[int]
	// queuePass: the queue was read (queued runs and cancel requests), under this epoch
	queuePass testsignal.Signal[int64]
	// definitionsRead: woken by notifications or the poll, the definition watch made this
	// many reads (a comparison of every version counts one, not the reloads of what changed)
	definitionsRead testsignal.Signal[int]
	// slotAudit: a slot audit read the rows of this many jobs' due slots
	slotAudit testsignal.Signal[int]
	// spent: a slot came due after its job's max_runs ran, and nothing was recorded
	// ("job@<unix seconds>")
	spent testsignal.Signal[string]
	// caughtUp: a term's catch-up ended, with how many jobs it accounted for
	caughtUp testsignal.Signal[int]
	// runDays: a pass of the day partitions' upkeep ended, with how many days it added
	runDays testsignal.Signal[int]
	// backfillPass: the backfiller stepped this many running backfills
	backfillPass testsignal.Signal[int]
	// callbackWatch: a pass of the callback watch committed, with the runs it ended
	callbackWatch testsignal.Signal[[]store.Ended]
}

func (s *testSignals) init() {
	s.leading.Init()
	s.stopped.Init()
	s.finished.Init()
	s.interrupted.Init()
	s.rescued.Init()
	s.definitionLoaded.Init()
	s.claimBatch.Init()
	s.repaired.Init()
	s.queuePass.Init()
	s.definitionsRead.Init()
	s.slotAudit.Init()
	s.spent.Init()
	s.caughtUp.Init()
	s.runDays.Init()
	s.backfillPass.Init()
	s.callbackWatch.Init()
}
