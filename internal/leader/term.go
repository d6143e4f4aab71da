package leader

import (
	"context"
	"time"

	"github.com/google/uuid"

	"github.com/schedulerhq/scheduler/internal/store"
)

// Term is one period of leadership of this replica.
type Term struct {
	// Partition is the partition the term leads: 0 is the coordinator's term (the
	// built-in jobs, the cluster-wide duties and partition 0's runtime jobs), p ≥ 1 a
	// partition's (docs/design.md, "Partitions").
	Partition int
	// Epoch is the fencing token: every write of the term goes through store.DB.Fenced
	// with it and fails once another replica has been elected.
	Epoch int64
	// TermID is the random id the term's election drew: with Epoch, the identity the fence
	// compares (store.Fence), which a rollback of the database cannot recreate.
	TermID uuid.UUID
	// Since is when the term began, on the database clock.
	Since time.Time
	// FailedOver says why the database is believed to have failed over since the previous
	// term ("" when it is not): its timeline changed, or the leader row went back behind a
	// term this replica saw. Commits of the previous terms may be lost; the engine repairs the
	// slots of a window before Since instead of recording them missed.
	FailedOver string
	// Ctx is cancelled when the term ends (step-down, resignation, shutdown): the term
	// starts nothing more (claims, timers, services). What it started may outlive it for a
	// while: see RunsCtx.
	Ctx context.Context

	// runs is RunsCtx's context; nil: Ctx.
	runs context.Context
	work *work
}

// RunsCtx is cancelled when the runs the term started must stop too. A term that is lost
// (its lock gone, another replica elected) ends it with Ctx. A term given up (a partition
// released to rebalance, a step-down, a shutdown) ends it once its Term.Holds are released
// or its grace (Config.RunGrace) has passed (drain): a call in flight finishes and records
// its end under the term, instead of being cut and made again, under the same key, by the
// next holder's recovery.
func (t Term) RunsCtx() context.Context {
	if t.runs == nil {
		return t.Ctx
	}
	return t.runs
}

// ending ends a term: lost at once, or given up in two steps (stopStarting, then stopRuns
// once drained).
type ending struct{ stopStarting, stopRuns context.CancelFunc }

func (e ending) lost() {
	e.stopStarting()
	e.stopRuns()
}

// begin gives t its contexts and work: Ctx ends with parent, but RunsCtx does not, since
// a shutdown gives the term up and drains it like a resignation.
func begin(parent context.Context, t Term) (Term, ending) {
	var e ending
	t.Ctx, e.stopStarting = context.WithCancel(parent)
	t.runs, e.stopRuns = context.WithCancel(context.WithoutCancel(parent))
	t.work = &work{}
	return t, e
}

// drain waits up to grace for the term's holds, stops its runs (cutting those still in
// flight, which then record nothing), and waits for the holds left up to timeout in all; it
// reports whether every hold was released in time. The grace is short because the lock is
// held meanwhile: nothing of the term's partition is claimed, whoever's job it is.
func (t Term) drain(e ending, grace, timeout time.Duration) bool {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	graceCtx, cancelGrace := context.WithTimeout(ctx, grace)
	done := t.work.wait(graceCtx)
	cancelGrace()
	e.stopRuns()
	return done || t.work.wait(ctx)
}

// Fence is the identity every write of the term is fenced by.
func (t Term) Fence() store.Fence {
	return store.Fence{Partition: t.Partition, Epoch: t.Epoch, TermID: t.TermID}
}

// Hold registers work of the term whose writes must commit before another replica leads
// (a run recording what it sent, docs/design.md guarantee 10); release ends it. A voluntary
// resignation (shutdown, step-down) cancels Ctx, waits up to Config.DrainTimeout for every
// release, and only then gives up the lock, so that the work's fenced writes still pass the
// fence. A term lost involuntarily (lock lost, fenced) waits for nothing: its fence has
// already moved on.
func (t Term) Hold() (release func()) {
	if t.work == nil {
		return func() {}
	}
	return t.work.hold()
}
