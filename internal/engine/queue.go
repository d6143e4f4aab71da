package engine

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/schedulerhq/scheduler/internal/backoff"
	"github.com/schedulerhq/scheduler/internal/jobcontract"
	"github.com/schedulerhq/scheduler/internal/leader"
	"github.com/schedulerhq/scheduler/internal/store"
)

// queueCooldown is the least time between two passes over the queue woken by
// notifications: any login may NOTIFY, so a flood of them costs one pass per cooldown, and
// a queued run waits at most this long behind the previous pass.
const queueCooldown = 25 * time.Millisecond

// queueLoop starts queued runs and applies cancel requests, when woken (a notification on
// store.RunsChannel, or the notifier's resync) and every PollInterval, until the term ends.
func (e *Engine) queueLoop(ctx context.Context, term leader.Term, log *slog.Logger, t *timers, wake <-chan struct{}) {
	ticker := time.NewTicker(e.conf.PollInterval)
	defer ticker.Stop()
	for {
		last := time.Now()
		e.testSignals.queuePass.Send(term.Epoch)
		e.startQueued(ctx, term, log, t)
		e.applyCancelRequests(ctx, term, log)
		select {
		case <-ctx.Done():
			return
		case <-wake:
			// Wake-ups during the cooldown are one, at its end.
			if !backoff.Sleep(ctx, queueCooldown-time.Since(last)) {
				return
			}
		case <-ticker.C:
		}
	}
}

// startQueued moves every queued run to running under this term's epoch and starts it.
// A run of a job this replica has not loaded may be of a job defined a moment ago (a
// trigger right after the create, before the watch followed it): its definition is
// loaded now, and only a job that is not defined at all fails.
func (e *Engine) startQueued(ctx context.Context, term leader.Term, log *slog.Logger, t *timers) {
	for ctx.Err() == nil {
		run, unknown, err := e.pickQueued(ctx, term)
		if err != nil {
			if ctx.Err() == nil {
				log.Warn("picking a queued run failed; retrying at the next poll", "error", err)
			}
			return
		}
		if run == nil {
			return
		}
		if unknown && t != nil && e.conf.Runtime != nil {
			if err := e.reloadDefinition(ctx, log, t, run.Job); err != nil && ctx.Err() == nil {
				log.Warn("loading the job of a queued run failed", "job", run.Job, "run_id", run.ID, "error", err)
			}
			if en := e.entry(run.Job); en != nil {
				e.start(ctx, term, en, run)
				continue
			}
		}
		if unknown {
			// finish lowers the running gauge, so the run is announced first.
			e.conf.Metrics.RunStarted(run.Job, run.Trigger, 0)
			e.newExecution(ctx, term, nil, run).logged(ctx).finish(jobcontract.Stats{},
				fmt.Errorf("job %q is not configured on the leader %s; check the leader's version and job list", run.Job, e.conf.InstanceID), nil)
			e.untrack(run.ID)
		}
	}
}

// pickQueued picks the oldest queued run and starts it, or, for a job this replica does not
// know, only owns it (unknown) for the caller to finish as failed.
func (e *Engine) pickQueued(ctx context.Context, term leader.Term) (run *store.Run, unknown bool, err error) {
	e.claiming.RLock()
	defer e.claiming.RUnlock()
	picking := time.Now()
	err = e.conf.DB.Fenced(ctx, term.Fence(), func(tx *store.Tx) error {
		var err error
		run, err = tx.PickQueued(ctx, e.conf.InstanceID)
		return err
	})
	if err != nil || run == nil {
		return nil, false, err
	}
	e.runLog(term, run).Info("queued run picked")
	en := e.entry(run.Job)
	if en == nil {
		e.track(run, func(error) {})
		return run, true, nil
	}
	e.start(e.traceQueued(ctx, picking, run), term, en, run)
	return run, false, nil
}

// applyCancelRequests cancels the running runs whose cancellation was requested; they end
// cancelled.
func (e *Engine) applyCancelRequests(ctx context.Context, term leader.Term, log *slog.Logger) {
	ids, err := e.conf.DB.CancelRequested(ctx, term.Partition, term.Epoch)
	if err != nil {
		if ctx.Err() == nil {
			log.Warn("reading cancel requests failed; retrying at the next poll", "error", err)
		}
		return
	}
	for _, id := range ids {
		if job, ok := e.cancelRun(id); ok {
			log.Info("cancel requested; cancelling the run", "run_id", id, "job", job)
		}
	}
}

// replaced acts on the runs a claim of a replace job replaced (store.ClaimOutcome): the ones
// it ended are counted; the ones whose cancel it asked for are cancelled now, as
// applyCancelRequests would at its next pass, and end cancelled when they stop.
func (e *Engine) replaced(log *slog.Logger, out store.ClaimOutcome) {
	for _, x := range out.Replaced {
		e.conf.Metrics.RunRecorded(x.Job, x.Status, x.Trigger)
		log.Info("run replaced by the slot (overlap replace): ended cancelled", "run_id", x.ID, "run_trigger", x.Trigger)
	}
	for _, id := range out.Cancelling {
		_, ok := e.cancelRun(id)
		log.Info("run replaced by the slot (overlap replace): cancelling it", "run_id", id, "owned_here", ok)
	}
}
