package engine

import (
	"context"
	"time"

	"github.com/schedulerhq/scheduler/internal/notify"
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
}

type finishRequest struct {
	term store.Fence
	f    store.Finish
	// job and notify: the run's job and the events its rules want, recorded with the end.
	job    string
	notify notify.Events
	done   chan error
}

func newFinisher(db *store.DB) *finisher {
	return &finisher{db: db, requests: make(chan *finishRequest, maxClaimBatch)}
}

// finish records one run's end with the others ending with it. A run that was no longer
// running gives store.ErrNotRunning.
func (f *finisher) finish(ctx context.Context, term store.Fence, fin store.Finish, job string, on notify.Events) error {
	done := make(chan error, 1)
	return submit(ctx, f.requests, &finishRequest{term: term, f: fin, job: job, notify: on, done: done}, done)
}

// run records batches until ctx ends; the engine ends it once every run has finished.
func (f *finisher) run(ctx context.Context) {
	for batch := gather(ctx, f.requests, maxClaimBatch, batchLinger); batch != nil; batch = gather(ctx, f.requests, maxClaimBatch, batchLinger) {
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

func (f *finisher) record(term store.Fence, rs []*finishRequest) {
	ctx, cancel := context.WithTimeout(context.Background(), finishBatchTimeout)
	defer cancel()
	finishes := make([]store.Finish, len(rs))
	for i, r := range rs {
		finishes[i] = r.f
	}
	var done map[int64]bool
	err := f.db.Fenced(ctx, term, func(tx *store.Tx) error {
		var err error
		if done, err = tx.FinishRuns(ctx, finishes); err != nil {
			return err
		}
		// The events commit with the ends they report, or neither does.
		return finishEvents(ctx, tx, rs, done)
	})
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
