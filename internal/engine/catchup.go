package engine

import (
	"context"
	"log/slog"
	"slices"
	"time"

	"github.com/schedulerhq/scheduler/internal/leader"
	"github.com/schedulerhq/scheduler/internal/store"
)

// rescueLoop runs the rescuer for the whole term, not only at its start (River's
// JobRescuer): a run can be left running with nobody running it while this replica leads,
// when a claim or a pick-up committed on the server but its answer was lost.
func (e *Engine) rescueLoop(ctx context.Context, term leader.Term, log *slog.Logger) {
	ticker := time.NewTicker(e.conf.RescueInterval)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
		e.rescue(ctx, term, log)
	}
}

// rescue marks as abandoned the runs earlier epochs left running and the runs of this term
// that no goroutine of this replica owns, and queues one recovery run each (docs/design.md
// guarantees 5 and 10); the queue then runs them like manual runs. Each pass ends with the
// rescued test signal.
func (e *Engine) rescue(ctx context.Context, term leader.Term, log *slog.Logger) {
	orphans, err := e.orphans(ctx, term)
	var abandoned []store.Abandoned
	if err == nil {
		err = e.conf.DB.Fenced(ctx, term.Epoch, func(tx *store.Tx) error {
			var err error
			abandoned, err = tx.AbandonRuns(ctx, orphans)
			return err
		})
	}
	if err != nil {
		if ctx.Err() == nil {
			log.Error("recovering abandoned runs failed; the rescuer retries", "error", err, "retry_in", e.conf.RescueInterval)
		}
		return
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
	e.testSignals.rescued.Send(len(abandoned))
}

// orphans lists the running runs of this term that no goroutine of this replica owns.
// Claims and pick-ups wait meanwhile (claiming), so a run between its commit and its
// goroutine's start is never taken for an orphan.
func (e *Engine) orphans(ctx context.Context, term leader.Term) ([]int64, error) {
	e.claiming.Lock()
	defer e.claiming.Unlock()
	ids, err := e.conf.DB.RunningRuns(ctx, term.Epoch)
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

// catchUp handles the slots nobody claimed (docs/design.md guarantee 3): for each enabled job it
// compares the schedule with the slots recorded, walking back from now over at most
// MaxMissed+1 slots and not before the job's first recorded slot, so gaps inside that
// walk are found (not only the tail after the latest row) and a long outage costs the cap,
// not one step per period. The latest slot, when unrecorded and within the job's catch-up
// window, runs once with trigger catch-up; every other unrecorded slot is recorded as
// missed. Everything is decided on the database clock.
//
// It returns, per job, the latest slot it considered, from which startTimers ticks the
// slots that come due before its timers fire.
func (e *Engine) catchUp(ctx context.Context, term leader.Term, log *slog.Logger) map[string]time.Time {
	enabled := e.enabledEntries()
	upTo := make(map[string]time.Time, len(enabled))
	for _, en := range enabled {
		log := log.With("job", en.conf.Name)
		sched := en.conf.Schedule
		var (
			latest time.Time
			missed []time.Time
			out    store.ClaimOutcome
		)
		e.claiming.RLock()
		err := e.conf.DB.Fenced(ctx, term.Epoch, func(tx *store.Tx) error {
			missed, out = nil, store.ClaimOutcome{}
			now, err := tx.Now(ctx)
			if err != nil {
				return err
			}
			latest = sched.Prev(now)
			if latest.IsZero() {
				return nil
			}
			first, err := tx.FirstSlot(ctx, en.conf.Name)
			if err != nil {
				return err
			}
			if en.def != nil && latest.Before(en.since) {
				// The slot came before this version of the definition: it was another
				// schedule's, or the job did not exist yet.
				return nil
			}
			if en.def != nil && first.Before(en.since) {
				first = en.since
			}
			// Newest first. A job that never recorded a slot has no known gap before its
			// latest slot.
			walk := []time.Time{latest}
			before := func(s time.Time) time.Time { return sched.Prev(s.Add(-time.Second)) }
			for s := before(latest); !first.IsZero() && !s.IsZero() && !s.Before(first) && len(walk) <= e.conf.MaxMissed; s = before(s) {
				walk = append(walk, s)
			}
			rows, err := tx.RecordedSlots(ctx, en.conf.Name, walk)
			if err != nil {
				return err
			}
			recorded := make(map[int64]bool, len(rows)) // by Unix second: slots are whole seconds
			for _, s := range rows {
				recorded[s.Unix()] = true
			}
			runLatest := !recorded[latest.Unix()] && en.conf.Catchup > 0 && now.Sub(latest) <= en.conf.Catchup
			for i := len(walk) - 1; i >= 0; i-- { // oldest first, the order they came due
				if s := walk[i]; !recorded[s.Unix()] && !(i == 0 && runLatest) {
					missed = append(missed, s)
				}
			}
			if len(missed) > 0 {
				if _, err := tx.RecordMissed(ctx, en.conf.Name, missed, e.conf.InstanceID); err != nil {
					return err
				}
			}
			if !runLatest {
				return nil
			}
			out, err = tx.ClaimSlot(ctx, store.Claim{
				Job: en.conf.Name, ScheduledAt: latest, Trigger: store.TriggerCatchUp, MinGap: en.conf.MinGap,
				InstanceID: e.conf.InstanceID, DefinitionVersion: en.versionRef(),
			})
			return err
		})
		if err != nil {
			e.claiming.RUnlock()
			if ctx.Err() == nil {
				log.Error("catching up missed slots failed; the timers still run the next slots", "error", err)
			}
			continue
		}
		if !latest.IsZero() {
			upTo[en.conf.Name] = latest
		}
		for range missed {
			e.conf.Metrics.RunRecorded(en.conf.Name, store.StatusMissed, store.TriggerSchedule)
		}
		if len(missed) > 0 {
			log.Warn("recorded missed slots", "count", len(missed), "first", missed[0], "last", missed[len(missed)-1])
		}
		switch {
		case out.Run != nil:
			log.Info("caught up the latest missed slot", "run_id", out.Run.ID, "scheduled_at", latest)
			e.conf.Metrics.SetJobPaused(en.conf.Name, false)
			e.start(ctx, term, en, out.Run)
		case out.Skipped != "":
			log.Info("latest missed slot skipped", "run_id", out.SkippedID, "scheduled_at", latest, "reason", out.Skipped)
			e.conf.Metrics.RunRecorded(en.conf.Name, store.StatusSkipped, store.TriggerCatchUp)
			e.conf.Metrics.SetJobPaused(en.conf.Name, out.Skipped == store.ReasonPaused)
		}
		e.claiming.RUnlock()
	}
	return upTo
}
