package engine

import (
	"context"
	"time"

	"github.com/schedulerhq/scheduler/internal/backoff"
	"github.com/schedulerhq/scheduler/internal/runend"
	"github.com/schedulerhq/scheduler/internal/runtimejob"
	"github.com/schedulerhq/scheduler/internal/store"
)

// finishBatchTimeout bounds one batch's transaction; a request whose batch failed retries
// (execution.record) while its term lasts.
const finishBatchTimeout = 10 * time.Second

// finisher records the ends of runs in batches: at 10 000 jobs due on one minute their runs
// end within a second of each other, and one fenced transaction records hundreds of ends
// (with their pending call attempts) instead of one transaction each.
type finisher struct {
	requests chan *finishRequest
	db       *store.DB
	// callsQueued reports calls waiting for a host's or the replica's concurrency bound
	// (targets.Caller.Queued); nil: never.
	callsQueued func() bool
	// instance names this replica in the audit row of an automatic pause.
	instance string
	// paused hears of the jobs a batch paused, once it committed.
	paused func([]runend.Paused)
}

// While calls queue for the concurrency bounds, the finisher holds the ends it has, up to
// finishHoldMax, looking again every finishHoldPoll. Such a queue is a burst: every job of
// a schedule due at once, called as fast as the bounds allow. Recording the ends of the
// first calls while the last ones were still to be made took a quarter of the CPU those
// calls needed, PostgreSQL's updates and this process's encoding, on the scale benchmark's
// two cores; held, they are recorded once the burst is through, in a few large batches.
// A held end keeps the time it ended (store.Finish.EndedAgo), and holds its job's
// overlap policy that much longer.
const (
	finishHoldMax  = 2 * time.Second
	finishHoldPoll = 10 * time.Millisecond
)

type finishRequest struct {
	term  store.Fence
	f     store.Finish
	ended time.Time // when the run ended: its end may wait for its batch (hold)
	// rules: what the run's job says about its end (runend.Record, with the end).
	rules runend.Rules
	done  chan error
}

func newFinisher(db *store.DB, callsQueued func() bool, instance string, paused func([]runend.Paused)) *finisher {
	return &finisher{db: db, requests: make(chan *finishRequest, maxClaimBatch), callsQueued: callsQueued,
		instance: instance, paused: paused}
}

// finish records the end of one run, which ended at ended, with the others ending with it.
// A run that was no longer running gives store.ErrNotRunning.
func (f *finisher) finish(ctx context.Context, term store.Fence, fin store.Finish, ended time.Time, rules runend.Rules) error {
	done := make(chan error, 1)
	return submit(ctx, f.requests, &finishRequest{term: term, f: fin, ended: ended, rules: rules, done: done}, done)
}

// run records batches until ctx ends; the engine ends it once every run has finished.
func (f *finisher) run(ctx context.Context) {
	for batch := gather(ctx, f.requests, maxClaimBatch, batchLinger); batch != nil; batch = gather(ctx, f.requests, maxClaimBatch, batchLinger) {
		batch = f.hold(ctx, batch)
		// Normally one epoch; a batch that straddles an election is recorded per epoch, and
		// the old epoch's part fails the fence.
		byTerm := map[store.Fence][]*finishRequest{}
		for _, r := range batch {
			byTerm[r.term] = append(byTerm[r.term], r)
		}
		for term, rs := range byTerm {
			f.record(term, rs)
		}
	}
}

// hold keeps batch, and takes the ends that join it, while calls queue, up to
// finishHoldMax and maxClaimBatch ends, or until ctx ends.
func (f *finisher) hold(ctx context.Context, batch []*finishRequest) []*finishRequest {
	if f.callsQueued == nil {
		return batch
	}
	until := time.Now().Add(finishHoldMax)
	for len(batch) < maxClaimBatch && f.callsQueued() && time.Now().Before(until) {
		if !backoff.Sleep(ctx, finishHoldPoll) {
			break
		}
		batch = takeWaiting(f.requests, batch, maxClaimBatch)
	}
	return batch
}

func (f *finisher) record(term store.Fence, rs []*finishRequest) {
	ctx, cancel := context.WithTimeout(context.Background(), finishBatchTimeout)
	defer cancel()
	finishes := make([]store.Finish, len(rs))
	rules := make(map[int64]runend.Rules, len(rs))
	for i, r := range rs {
		finishes[i] = r.f
		finishes[i].EndedAgo = time.Since(r.ended)
		rules[r.f.RunID] = r.rules
	}
	var done map[int64]bool
	var paused []runend.Paused
	err := f.db.Fenced(ctx, term, func(tx *store.Tx) error {
		ended, err := tx.FinishRuns(ctx, finishes)
		if err != nil {
			return err
		}
		done = make(map[int64]bool, len(ended))
		ends := make([]runend.End, len(ended))
		for i, x := range ended {
			done[x.ID] = true
			ends[i] = runend.End{Ended: x, Rules: rules[x.ID]}
		}
		// The events and the automatic pause commit with the ends they follow from, or
		// none does.
		paused, err = runend.Record(ctx, tx, ends, f.instance)
		return err
	})
	if err == nil && len(paused) > 0 {
		f.paused(paused)
	}
	for _, r := range rs {
		switch {
		case err != nil:
			r.done <- err
		case !done[r.f.RunID]:
			r.done <- store.ErrNotRunning
		default:
			r.done <- nil
		}
	}
}

// callsQueued is the finisher's view of rt's calls: nil without HTTP jobs.
func callsQueued(rt *runtimejob.Runtime) func() bool {
	if rt == nil || rt.Caller == nil {
		return nil
	}
	return rt.Caller.Queued
}
