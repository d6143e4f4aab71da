package engine

import (
	"context"
	"log/slog"
	"time"

	"github.com/schedulerhq/scheduler/internal/leader"
	"github.com/schedulerhq/scheduler/internal/store"
)

// maxClaimBatch bounds the claims of one transaction (about 80 ms at 5 000 on a 2-core
// machine), so that a failed batch is retried without holding many others back, and the
// runs of the first batch start while the next one is claimed.
const maxClaimBatch = 5000

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
	en       *entry
	slot     time.Time
	trigger  string
	queueOne bool
	log      *slog.Logger
	done     chan error // the claim's result; the run, if it won, has started
}

func newClaimer(e *Engine, term leader.Term) *claimer {
	return &claimer{e: e, term: term, requests: make(chan *claimRequest, maxClaimBatch)}
}

// claim claims one slot with the others that are due with it and starts its run if it won.
// It returns the batch transaction's error, earlyError or errBusy, as tick expects.
func (c *claimer) claim(ctx context.Context, log *slog.Logger, en *entry, slot time.Time, trigger string, queueOne bool) error {
	done := make(chan error, 1)
	return submit(ctx, c.requests, &claimRequest{en: en, slot: slot, trigger: trigger, queueOne: queueOne, log: log, done: done}, done)
}

// run gathers and claims batches until ctx ends.
func (c *claimer) run(ctx context.Context) {
	for batch := gather(ctx, c.requests, maxClaimBatch); batch != nil; batch = gather(ctx, c.requests, maxClaimBatch) {
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
			InstanceID: e.conf.InstanceID, QueueOne: r.queueOne, DefinitionVersion: r.en.versionRef()}
	}
	var outs []store.ClaimOutcome
	err := e.conf.DB.Fenced(ctx, c.term.Epoch, func(tx *store.Tx) error {
		var err error
		outs, err = tx.ClaimSlots(ctx, claims)
		return err
	})
	e.testSignals.claimBatch.Send(len(batch))
	for i, r := range batch {
		if err != nil {
			r.done <- err
			continue
		}
		r.done <- e.claimed(ctx, c.term, r.log, r.en, r.trigger, outs[i])
	}
}
