package engine

import (
	"context"
	"log/slog"
	"slices"
	"time"

	"github.com/schedulerhq/scheduler/internal/leader"
	"github.com/schedulerhq/scheduler/internal/store"
	"github.com/schedulerhq/scheduler/internal/targets"
)

// rescueIntervalDefault spaces the rescuer's passes: a run nobody owns blocks its job
// (every slot is skipped as an overlap) until a pass finds it.
const rescueIntervalDefault = 10 * time.Second

// rescuer is the leader service that marks as abandoned the runs other epochs left running
// (earlier ones, or a term a failover lost: store.Tx.AbandonRuns) and the runs of this term
// that no goroutine of this replica owns, and queues one recovery run each (docs/design.md
// guarantees 5 and 10); the queue then runs them like manual runs. It passes at the term's
// start and then every interval for the whole term, not only at its start (River's
// JobRescuer): a run can be left running with nobody running it while this replica leads,
// when a claim or a pick-up committed on the server but its answer was lost.
type rescuer struct {
	e        *Engine
	term     leader.Term
	log      *slog.Logger
	interval time.Duration // Config.RescueInterval, else rescueIntervalDefault
}

func (r *rescuer) run(ctx context.Context) {
	ticker := time.NewTicker(r.interval)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
		_ = r.pass(ctx) // logged; the next pass tries again
	}
}

// pass rescues once. It ends with the rescued test signal, carrying how many runs it
// abandoned; a pass that failed sends nothing and returns its error (it was logged).
func (r *rescuer) pass(ctx context.Context) error {
	e, log := r.e, r.log
	orphans, err := r.orphans(ctx)
	var (
		abandoned []store.Abandoned
		backends  []store.SQLBackend
	)
	if err == nil {
		err = e.conf.DB.Fenced(ctx, r.term.Fence(), func(tx *store.Tx) error {
			var err error
			if abandoned, err = tx.AbandonRuns(ctx, e.clock.nowOrNil(), orphans); err != nil {
				return err
			}
			ids := make([]int64, len(abandoned))
			for i, a := range abandoned {
				ids[i] = a.ID
			}
			backends, err = tx.TakeSQLBackends(ctx, ids)
			return err
		})
	}
	if err != nil {
		if ctx.Err() == nil {
			log.Error("recovering abandoned runs failed; the rescuer retries", "error", err)
		}
		return err
	}
	for _, a := range abandoned {
		e.conf.Metrics.RunRecorded(a.Job, store.StatusAbandoned, a.Trigger)
		if a.RecoveryID == 0 {
			log.Warn("run abandoned; not recovered because the job already has a queued run",
				"run_id", a.ID, "job", a.Job, "run_epoch", a.Epoch)
			continue
		}
		log.Warn("run abandoned; queued its recovery",
			"run_id", a.ID, "job", a.Job, "run_epoch", a.Epoch, "recovery_run_id", a.RecoveryID)
	}
	r.endSQLBackends(backends)
	e.testSignals.rescued.Send(len(abandoned))
	return nil
}

// endSQLBackends ends, in the background, the target backends of SQL runs that a replica
// which died left running: a statement that never reads its socket (a loop trapping
// cancels) would otherwise outlive its run for ever (docs/design.md guarantee 12).
func (r *rescuer) endSQLBackends(backends []store.SQLBackend) {
	log := r.log
	for _, b := range backends {
		var target *targets.SQLTarget
		var err error
		if r.e.conf.Runtime != nil {
			target, err = r.e.conf.Runtime.SQLTargets.Lookup(b.Target)
		}
		if target == nil {
			log.Warn("a SQL run's backend cannot be ended: its target is not declared on this leader",
				"run_id", b.RunID, "target", b.Target, "pid", b.PID, "error", err)
			continue
		}
		go func() {
			if err := target.EndBackend(b.PID, b.BackendStart); err != nil {
				log.Warn("ending the backend a dead leader's SQL run left failed", "run_id", b.RunID, "target", b.Target, "pid", b.PID, "error", err)
				return
			}
			log.Info("ended the backend a dead leader's SQL run left, if it still ran", "run_id", b.RunID, "target", b.Target, "pid", b.PID)
		}()
	}
}

// orphans lists the running runs of this term that no goroutine of this replica owns.
// Claims and pick-ups wait meanwhile (claiming), so a run between its commit and its
// goroutine's start is never taken for an orphan.
func (r *rescuer) orphans(ctx context.Context) ([]int64, error) {
	e := r.e
	e.claiming.Lock()
	defer e.claiming.Unlock()
	ids, err := e.conf.DB.RunningRuns(ctx, r.term.Partition, r.term.Epoch)
	if err != nil {
		return nil, err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.DeleteFunc(ids, func(id int64) bool {
		_, owned := e.running[id]
		return owned
	}), nil
}
