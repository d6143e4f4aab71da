package engine

import (
	"context"
	"log/slog"

	"github.com/schedulerhq/scheduler/internal/leader"
)

// The leader's services (River's maintenance services): each a small type with its settings
// (defaults as named constants beside it), a pass that ends with a test signal, and a run
// that passes every interval until the term ends. They are listed here once: lead starts
// them for each term.

// service is a leader service for one term.
type service interface{ run(ctx context.Context) }

// serviceFunc is a term's loop that is not (yet) a type of its own.
type serviceFunc func(ctx context.Context)

func (f serviceFunc) run(ctx context.Context) { f(ctx) }

// termServices are one term's services.
type termServices struct {
	// runDays and rescuer pass once at the term's start (the rescuer tried again after
	// a failover: rescuer.first), before the catch-up, which runs once. runDays is a
	// cluster-wide duty: nil but on partition 0's engine.
	runDays *runDays
	rescuer *rescuer
	catchUp *catchUp
	// loops run, beside the queue, once the timers run.
	loops []service
}

// services builds term's services. timers is nil when they failed to start: the
// definitions watch, which adds and removes timers, is then left out.
func (e *Engine) services(term leader.Term, log *slog.Logger) *termServices {
	s := &termServices{
		rescuer: &rescuer{e: e, term: term, log: log, interval: e.conf.RescueInterval},
		catchUp: &catchUp{e: e, term: term, log: log},
	}
	if e.coordinator() {
		s.runDays = &runDays{db: e.conf.DB, log: log, interval: runDaysIntervalDefault, passed: &e.testSignals.runDays}
	}
	return s
}

// coordinator reports whether this engine is partition 0's, which also does the cluster's
// duties: the day partitions of job_runs, the delivery of notifications, and the backfills
// of every partition (they only queue runs, unfenced, into each job's partition, as the API
// does; one poller for the cluster, where one per partition polled 4 times a second each).
// The partitions' services (the rescue, the catch-up, the queue, the callback watch, the
// slot audit, the failover repair, the definitions watch) run on every engine, each over its
// own partition's jobs and runs.
func (e *Engine) coordinator() bool { return e.conf.Partition == 0 }

// withLoops lists the services that run for the whole term once the timers run.
func (s *termServices) withLoops(e *Engine, term leader.Term, log *slog.Logger, t *timers) *termServices {
	s.loops = []service{
		s.rescuer,
		&callbackWatch{e: e, term: term, log: log, interval: callbackWatchIntervalDefault, passed: &e.testSignals.callbackWatch},
		&slotAuditor{e: e, log: log, interval: e.conf.SlotAuditInterval, grace: e.conf.SlotAuditGrace},
	}
	if s.runDays != nil {
		s.loops = append(s.loops, s.runDays)
	}
	if e.coordinator() {
		s.loops = append(s.loops, &backfiller{e: e, log: log, interval: backfillIntervalDefault})
	}
	if e.conf.Notifications != nil && e.coordinator() {
		s.loops = append(s.loops, &delivery{s: e.conf.Notifications, term: term, log: log, rules: e.NotifyRules})
	}
	if t != nil && e.conf.Runtime != nil {
		s.loops = append(s.loops, serviceFunc(func(ctx context.Context) { e.watchDefinitions(ctx, term, log, t) }))
	}
	return s
}
