package engine

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"time"

	"github.com/schedulerhq/scheduler/internal/leader"
	"github.com/schedulerhq/scheduler/internal/store"
	"github.com/schedulerhq/scheduler/internal/targets"
)

// rescueLoop runs the rescuer for the whole term, not only at its start (River's
// JobRescuer): a run can be left running with nobody running it while this replica leads,
// when a claim or a pick-up committed on the server but its answer was lost.
func (e *Engine) rescueLoop(ctx context.Context, term leader.Term, log *slog.Logger) {
	ticker := time.NewTicker(e.conf.RescueInterval)
	defer ticker.Stop()
	lastDays := time.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
		e.rescue(ctx, term, log)
		if time.Since(lastDays) >= runDaysInterval {
			e.addRunDays(ctx, log)
			lastDays = time.Now()
		}
	}
}

// runDaysInterval spaces the leader's checks of the day partitions ahead.
const runDaysInterval = time.Hour

// addRunDays adds the partitions of job_runs for the days ahead (store.DaysAhead): a day
// without one would refuse its runs.
func (e *Engine) addRunDays(ctx context.Context, log *slog.Logger) {
	days, err := e.conf.DB.AddRunDays(ctx)
	if err != nil {
		if ctx.Err() == nil {
			log.Error("adding the day partitions of job_runs failed; runs of a day without one cannot be recorded",
				"error", err, "days_ahead", store.DaysAhead)
		}
		return
	}
	for _, d := range days {
		log.Info("day partition of job_runs added", "day", d.Format(time.DateOnly))
	}
}

// rescue marks as abandoned the runs earlier epochs left running and the runs of this term
// that no goroutine of this replica owns, and queues one recovery run each (docs/design.md
// guarantees 5 and 10); the queue then runs them like manual runs. Each pass ends with the
// rescued test signal.
func (e *Engine) rescue(ctx context.Context, term leader.Term, log *slog.Logger) {
	orphans, err := e.orphans(ctx, term)
	var (
		abandoned []store.Abandoned
		backends  []store.SQLBackend
	)
	if err == nil {
		err = e.conf.DB.Fenced(ctx, term.Fence(), func(tx *store.Tx) error {
			var err error
			if abandoned, err = tx.AbandonRuns(ctx, orphans); err != nil {
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
	e.endSQLBackends(log, backends)
	e.testSignals.rescued.Send(len(abandoned))
}

// endSQLBackends ends, in the background, the target backends of SQL runs that a replica
// which died left running: a statement that never reads its socket (a loop trapping
// cancels) would otherwise outlive its run for ever (docs/design.md guarantee 12).
func (e *Engine) endSQLBackends(log *slog.Logger, backends []store.SQLBackend) {
	for _, b := range backends {
		var target *targets.SQLTarget
		var err error
		if e.conf.Runtime != nil {
			target, err = e.conf.Runtime.SQLTargets.Lookup(b.Target)
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

// catchUpBatch is how many jobs one catch-up transaction decides: a hand-over with 10 000
// jobs costs a few dozen transactions of five statements each, not one transaction per job.
const catchUpBatch = 500

// catchUp handles the slots nobody claimed (docs/design.md guarantee 3): for each enabled job it
// compares the schedule with the slots recorded, walking back from now over at most
// MaxMissed+1 slots and not before the job's first recorded slot, so gaps inside that
// walk are found (not only the tail after the latest row) and a long outage costs the cap,
// not one step per period. The latest slot, when unrecorded and within the job's catch-up
// window, runs once with trigger catch-up; every other unrecorded slot is recorded as
// missed. Everything is decided on the database clock, for catchUpBatch jobs at a time.
//
// After a failover (term.FailedOver), every unrecorded slot from repairFrom on is left to
// the repair instead (failover.go): it may have been called by a term whose rows were lost.
//
// It returns, per job, the latest slot it considered, from which startTimers ticks the
// slots that come due before its timers fire, and the slots to repair.
func (e *Engine) catchUp(ctx context.Context, term leader.Term, log *slog.Logger) (map[string]time.Time, []repair) {
	enabled := e.enabledEntries()
	upTo := make(map[string]time.Time, len(enabled))
	from := e.repairFrom(term)
	var repairs []repair
	for lo := 0; lo < len(enabled) && ctx.Err() == nil; lo += catchUpBatch {
		batch := enabled[lo:min(lo+catchUpBatch, len(enabled))]
		rs, err := e.catchUpBatch(ctx, term, log, batch, upTo, from)
		repairs = append(repairs, rs...)
		if err == nil || ctx.Err() != nil || errors.Is(err, store.ErrNotLeader) {
			continue
		}
		if len(batch) == 1 {
			log.Error("catching up missed slots failed; the timers still run the next slots", "error", err, "job", batch[0].conf.Name)
			continue
		}
		// One job's slots must not cost the others theirs (a row its day cannot take, a
		// constraint): the batch is decided again job by job, and only the job that fails
		// alone goes without its catch-up.
		log.Warn("catching up a batch of jobs failed; catching them up one by one", "error", err, "jobs", len(batch))
		for _, en := range batch {
			if ctx.Err() != nil {
				break
			}
			rs, err := e.catchUpBatch(ctx, term, log, []*entry{en}, upTo, from)
			repairs = append(repairs, rs...)
			if err != nil && ctx.Err() == nil {
				log.Error("catching up missed slots failed; the timers still run the next slots", "error", err, "job", en.conf.Name)
			}
		}
	}
	return upTo, repairs
}

// jobCatchUp is what the catch-up decided for one job.
type jobCatchUp struct {
	en     *entry
	latest time.Time
	missed []time.Time
	run    bool // the latest slot runs (trigger catch-up)
}

func (e *Engine) catchUpBatch(ctx context.Context, term leader.Term, log *slog.Logger, batch []*entry,
	upTo map[string]time.Time, repairFrom time.Time) ([]repair, error) {
	e.claiming.RLock()
	defer e.claiming.RUnlock()
	var (
		decided []*jobCatchUp
		outs    []store.ClaimOutcome
		claimed []*jobCatchUp
		repairs []repair
		added   []time.Time
		spent   map[string]bool
		now     time.Time
	)
	// inRepair: a slot the repair catches up rather than the catch-up deciding it.
	inRepair := func(s time.Time) bool { return !repairFrom.IsZero() && !s.Before(repairFrom) }
	err := e.conf.DB.Fenced(ctx, term.Fence(), func(tx *store.Tx) error {
		decided, outs, claimed, repairs, added = nil, nil, nil, nil, nil
		var err error
		if now, err = tx.Now(ctx); err != nil {
			return err
		}
		// A job whose max_runs slots ran has no slot left to catch up or miss.
		if spent, err = spentJobs(ctx, tx, batch); err != nil {
			return err
		}
		names := make([]string, len(batch))
		for i, en := range batch {
			names[i] = en.conf.Name
		}
		firsts, err := tx.FirstSlots(ctx, names)
		if err != nil {
			return err
		}
		walks := make([][]time.Time, len(batch))
		var ranges []store.SlotRange
		for i, en := range batch {
			sched := en.conf.Schedule
			latest := sched.Prev(now)
			if latest.IsZero() || (en.def != nil && latest.Before(en.since)) || spent[en.conf.Name] {
				// No slot yet, or the slot came before this version of the definition: it
				// was another schedule's, or the job did not exist yet.
				continue
			}
			first := firsts[en.conf.Name]
			if en.def != nil && first.Before(en.since) {
				first = en.since
			}
			// Newest first. A job that never recorded a slot has no known gap before its
			// latest slot.
			walk := []time.Time{latest}
			before := func(s time.Time) time.Time { return sched.Prev(s.Add(-time.Second)) }
			for s := before(latest); !first.IsZero() && !s.IsZero() && !s.Before(first) && (len(walk) <= e.conf.MaxMissed || inRepair(s)); s = before(s) {
				walk = append(walk, s)
			}
			walks[i] = walk
			ranges = append(ranges, store.SlotRange{Job: en.conf.Name, From: walk[len(walk)-1], To: latest})
		}
		recorded, err := tx.RecordedSlotsIn(ctx, ranges)
		if err != nil {
			return err
		}
		var missedJobs []string
		var missedSlots []time.Time
		var claims []store.Claim
		for i, en := range batch {
			walk := walks[i]
			if walk == nil {
				continue
			}
			d := &jobCatchUp{en: en, latest: walk[0]}
			rec := recorded[en.conf.Name]
			d.run = !rec[d.latest.Unix()] && !inRepair(d.latest) && en.conf.Catchup > 0 && now.Sub(d.latest) <= en.conf.Catchup
			r := repair{en: en}
			for j := len(walk) - 1; j >= 0; j-- { // oldest first, the order they came due
				s := walk[j]
				if !rec[s.Unix()] && inRepair(s) {
					r.slots = append(r.slots, s)
					continue
				}
				if !rec[s.Unix()] && !(j == 0 && d.run) {
					d.missed = append(d.missed, s)
					missedJobs, missedSlots = append(missedJobs, en.conf.Name), append(missedSlots, s)
				}
			}
			if d.run {
				claims = append(claims, store.Claim{Job: en.conf.Name, ScheduledAt: d.latest, Trigger: store.TriggerCatchUp,
					MinGap: en.conf.MinGap, InstanceID: e.conf.InstanceID, DefinitionVersion: en.versionRef(), MaxRuns: en.conf.MaxRuns})
				claimed = append(claimed, d)
			}
			decided = append(decided, d)
			if len(r.slots) > 0 {
				repairs = append(repairs, r)
			}
		}
		if added, err = tx.AddRunDaysFor(ctx, append(slices.Clip(missedSlots), claimSlots(claims)...)); err != nil {
			return err
		}
		if len(missedSlots) > 0 {
			written, err := tx.RecordMissedSlots(ctx, missedJobs, missedSlots, e.conf.InstanceID)
			if err != nil {
				return err
			}
			if err := e.missedEvents(ctx, tx, written); err != nil {
				return err
			}
		}
		outs, err = tx.ClaimSlots(ctx, claims)
		return err
	})
	if err != nil {
		return nil, err
	}
	for _, en := range batch {
		if spent[en.conf.Name] {
			e.spent(log.With("job", en.conf.Name), en, now)
		}
	}
	for _, d := range added {
		log.Warn("day partition of job_runs added for slots caught up; it was missing (a long time without a leader, or a restored backup)",
			"day", d.Format(time.DateOnly))
	}
	// A job with nothing to decide (no slot yet, or its latest slot came before its
	// definition) has every slot up to now accounted for: the timers' start ticks those after
	// now. Without this a job created just before the election lost the slot that came due
	// between the catch-up and the timers.
	for _, en := range batch {
		if !spent[en.conf.Name] {
			upTo[en.conf.Name] = now
		}
	}
	for _, d := range decided {
		upTo[d.en.conf.Name] = d.latest
		for range d.missed {
			e.conf.Metrics.RunRecorded(d.en.conf.Name, store.StatusMissed, store.TriggerSchedule)
		}
		if len(d.missed) > 0 {
			log.Warn("recorded missed slots", "job", d.en.conf.Name, "count", len(d.missed),
				"first", d.missed[0], "last", d.missed[len(d.missed)-1])
		}
	}
	for i, d := range claimed {
		log := log.With("job", d.en.conf.Name, "scheduled_at", d.latest, "trigger", store.TriggerCatchUp)
		if out := outs[i]; out.Run != nil || out.Skipped != "" {
			if err := e.claimed(ctx, term, log, d.en, store.TriggerCatchUp, d.latest, out); err != nil {
				log.Warn("the latest missed slot was not caught up", "error", err)
			}
		}
	}
	return repairs, nil
}

// recordMissed records a slot that could not be claimed in its period as missed, as soon as
// the database answers again, so it is never silently lost.
func (e *Engine) recordMissed(ctx context.Context, term leader.Term, log *slog.Logger, en *entry, slot time.Time) {
	var n int
	err := retryWhileLeading(ctx, func() error {
		return e.conf.DB.Fenced(ctx, term.Fence(), func(tx *store.Tx) error {
			ids, err := tx.RecordMissed(ctx, en.conf.Name, []time.Time{slot}, e.conf.InstanceID)
			if err != nil {
				return err
			}
			n = len(ids)
			return e.missedEvents(ctx, tx, map[string][]int64{en.conf.Name: ids})
		})
	}, func(err error, d time.Duration) error {
		log.Warn("recording the missed slot failed; retrying", "error", err, "retry_in", d)
		return nil
	})
	switch {
	case err != nil:
		log.Warn("the term ended before the missed slot could be recorded; the next leader's catch-up records it", "error", err)
	case n > 0:
		e.conf.Metrics.RunRecorded(en.conf.Name, store.StatusMissed, store.TriggerSchedule)
		log.Warn("slot recorded missed")
	}
}

// claimSlots lists the slots of claims.
func claimSlots(claims []store.Claim) []time.Time {
	slots := make([]time.Time, len(claims))
	for i, c := range claims {
		slots[i] = c.ScheduledAt
	}
	return slots
}
