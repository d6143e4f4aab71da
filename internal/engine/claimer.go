package engine

import (
	"context"
	"log/slog"
	"time"

	"github.com/schedulerhq/scheduler/internal/leader"
	"github.com/schedulerhq/scheduler/internal/store"
)

// maxClaimBatch bounds the claims of one transaction (about 170 ms at 10 000 on a 2-core
// machine). A batch that leaves claims behind makes them wait for its runs to start, which
// then compete with their transaction: with batches of 5 000 the second took a second.
const maxClaimBatch = 10_000

// batchLinger is how long the claimer and the finisher wait for one more request before
// they close a batch.
const batchLinger = 2 * time.Millisecond

// claimer claims the slots of one term in batches: gocron fires each job's timer in its own
// goroutine, and the slots that come due at one instant (every job on "* * * * *") reach
// the claimer together. While one batch's transaction is in flight the next one gathers,
// so a thousand due slots cost a few transactions, not a thousand.
type claimer struct {
	e        *Engine
	term     leader.Term
	requests chan *claimRequest
}

type claimRequest struct {
	en      *entry
	slot    time.Time
	trigger string
	mode    claimMode
	ahead   time.Duration
	log     *slog.Logger
	done    chan error // the claim's result; the run, if it won, has started
}

// claimMode is what a claim does when the job has its bound of active runs.
type claimMode int

const (
	claimSkips    claimMode = iota // records the slot skipped (overlap)
	claimWaits                     // records nothing: the caller waits for a run to end (Busy)
	claimReplaces                  // cancels the active runs, then as claimWaits
)

func newClaimer(e *Engine, term leader.Term) *claimer {
	return &claimer{e: e, term: term, requests: make(chan *claimRequest, maxClaimBatch)}
}

// claim claims one slot with the others that are due with it and starts its run if it won.
// It returns the batch transaction's error, earlyError or errBusy, as tick expects.
func (c *claimer) claim(ctx context.Context, log *slog.Logger, en *entry, slot time.Time, trigger string, mode claimMode, ahead time.Duration) error {
	done := make(chan error, 1)
	return submit(ctx, c.requests, &claimRequest{en: en, slot: slot, trigger: trigger, mode: mode, ahead: ahead, log: log, done: done}, done)
}

// run gathers and claims batches until ctx ends.
func (c *claimer) run(ctx context.Context) {
	for batch := gather(ctx, c.requests, maxClaimBatch, batchLinger); batch != nil; batch = gather(ctx, c.requests, maxClaimBatch, batchLinger) {
		c.claimBatch(ctx, batch)
	}
}

// claimBatch claims batch in one fenced transaction and starts the runs that won, while
// holding claiming, so the rescuer never sees a won claim before its run is owned.
func (c *claimer) claimBatch(ctx context.Context, batch []*claimRequest) {
	e := c.e
	e.claiming.RLock()
	defer e.claiming.RUnlock()
	claims := make([]store.Claim, len(batch))
	for i, r := range batch {
		claims[i] = store.Claim{Job: r.en.conf.Name, ScheduledAt: r.slot, Trigger: r.trigger, MinGap: r.en.conf.MinGap,
			InstanceID: e.conf.InstanceID, DefinitionVersion: r.en.versionRef(), MaxRuns: r.en.conf.MaxRuns,
			QueueOne: r.mode == claimWaits, Replace: r.mode == claimReplaces, Ahead: r.ahead, Now: e.clock.nowOrNil()}
	}
	var outs []store.ClaimOutcome
	traced := e.traceClaims(ctx, len(claims))
	err := e.conf.DB.Fenced(ctx, c.term.Fence(), func(tx *store.Tx) error {
		var err error
		outs, err = tx.ClaimSlots(ctx, claims)
		return err
	})
	traced.end(outs, err)
	e.testSignals.claimBatch.Send(claims)
	for i, r := range batch {
		if err != nil {
			r.done <- err
			continue
		}
		r.done <- e.claimed(traced.slot(ctx, r, outs[i]), c.term, r.log, r.en, r.trigger, r.slot, outs[i])
	}
}
