package engine

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/schedulerhq/scheduler/internal/leader"
	"github.com/schedulerhq/scheduler/internal/runend"
	"github.com/schedulerhq/scheduler/internal/store"
	"github.com/schedulerhq/scheduler/internal/testsignal"
)

// callbackWatchIntervalDefault spaces the watch's passes: a run whose heartbeats stopped ends
// within heartbeat_timeout and this interval (plus a commit).
const callbackWatchIntervalDefault = time.Second

// callbackWatch is the leader service that, for the whole term, ends the accepted callback
// runs that were cancelled, whose heartbeats stopped or whose timeout passed, whichever
// leader accepted them, and records what each end means (runend) in the same fenced
// transaction.
type callbackWatch struct {
	e        *Engine // the jobs' rules, the metrics and the paused jobs' report
	term     leader.Term
	log      *slog.Logger
	interval time.Duration
	passed   *testsignal.Signal[[]store.Ended] // a pass committed, with the runs it ended
}

func (w *callbackWatch) run(ctx context.Context) {
	ticker := time.NewTicker(w.interval)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
		if err := w.pass(ctx); err != nil && ctx.Err() == nil && !errors.Is(err, store.ErrNotLeader) {
			w.log.Warn("ending expired callback runs failed; retrying", "error", err, "retry_in", w.interval)
		}
	}
}

// pass ends, in one fenced transaction, the runs due to end, with their events and pauses.
func (w *callbackWatch) pass(ctx context.Context) error {
	var ended []store.Ended
	var paused []runend.Paused
	due, err := w.e.conf.DB.CallbacksExpiring(ctx, w.e.clock.nowOrNil(), w.e.conf.Partition)
	if err != nil {
		return err
	}
	if !due {
		w.passed.Send(ended)
		return nil
	}
	err = w.e.conf.DB.Fenced(ctx, w.term.Fence(), func(tx *store.Tx) error {
		var err error
		if ended, err = tx.ExpireCallbacks(ctx, w.e.clock.nowOrNil()); err != nil {
			return err
		}
		ends := make([]runend.End, len(ended))
		for i, x := range ended {
			ends[i] = runend.End{Ended: x, Rules: w.e.rulesOf(x.Job)}
		}
		paused, err = runend.Record(ctx, tx, ends, w.e.conf.InstanceID)
		return err
	})
	if err != nil {
		return err
	}
	for _, x := range ended {
		w.e.conf.Metrics.RunRecorded(x.Job, x.Status, x.Trigger)
		w.log.Warn("callback run ended without its completion", "run_id", x.ID, "job", x.Job, "status", x.Status)
	}
	w.e.jobsPaused(paused)
	w.passed.Send(ended)
	return nil
}
