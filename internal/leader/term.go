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
	// Ctx is cancelled when the term ends (step-down, resignation, shutdown): everything
	// the term started must stop.
	Ctx context.Context

	work *work
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
