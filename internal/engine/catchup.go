package engine

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"time"

	"github.com/schedulerhq/scheduler/internal/leader"
	"github.com/schedulerhq/scheduler/internal/store"
)

// catchUpBatch is how many jobs one catch-up transaction decides: a hand-over with 10 000
// jobs costs a few dozen transactions of five statements each, not one transaction per job.
const catchUpBatch = 500

// catchUp is the leader service that handles, at a term's start, the slots nobody claimed
// (docs/design.md guarantee 3). What to run and record is planned by catchUpWalk and
// planCatchUp (catchup_plan.go) for catchUpBatch jobs at a time, on the database's clock
// (the engine's clock in tests); this type reads their rows and writes the plan.
//
// After a failover (term.FailedOver), every unrecorded slot from repairFrom on is left to
// the repair instead (failover.go): it may have been called by a term whose rows were lost.
type catchUp struct {
	e    *Engine
	term leader.Term
	log  *slog.Logger
}

// run returns, per job, the latest slot it considered, from which startTimers ticks the
// slots that come due before its timers fire, and the slots to repair. It ends with the
// caughtUp test signal, carrying how many jobs it decided.
func (c *catchUp) run(ctx context.Context) (map[string]time.Time, []repair) {
	e, log := c.e, c.log
	enabled := e.enabledEntries()
	upTo := make(map[string]time.Time, len(enabled))
	from := e.repairFrom(c.term)
	var repairs []repair
	for lo := 0; lo < len(enabled) && ctx.Err() == nil; lo += catchUpBatch {
		batch := enabled[lo:min(lo+catchUpBatch, len(enabled))]
		rs, err := c.batch(ctx, batch, upTo, from)
		repairs = append(repairs, rs...)
		if err == nil || ctx.Err() != nil || errors.Is(err, store.ErrNotLeader) {
			continue
		}
		// One job's slots must not cost the others theirs (a row its day cannot take, a
		// constraint): the batch is decided again job by job, and only the job that fails
		// alone goes without its catch-up. After a failover each job is tried again a few
		// times: without its catch-up the slots of its window would not be repaired.
		if len(batch) == 1 && c.term.FailedOver == "" {
			log.Error("catching up missed slots failed; the timers still run the next slots", "error", err, "job", batch[0].conf.Name)
			continue
		}
		if len(batch) > 1 {
			log.Warn("catching up a batch of jobs failed; catching them up one by one", "error", err, "jobs", len(batch))
		}
		for _, en := range batch {
			if ctx.Err() != nil {
				break
			}
			err := retryAfterFailover(ctx, c.term, func() error {
				rs, err := c.batch(ctx, []*entry{en}, upTo, from)
				repairs = append(repairs, rs...)
				return err
			})
			if err != nil && ctx.Err() == nil {
				log.Error("catching up missed slots failed; the timers still run the next slots", "error", err, "job", en.conf.Name)
			}
		}
	}
	e.testSignals.caughtUp.Send(len(upTo))
	return upTo, repairs
}

// jobCatchUp is what the catch-up decided for one job.
type jobCatchUp struct {
	en *entry
	catchUpPlan
}

// batch reads the rows of batch's walks, plans and writes, in one fenced transaction.
func (c *catchUp) batch(ctx context.Context, batch []*entry, upTo map[string]time.Time, repairFrom time.Time) ([]repair, error) {
	e, log, term := c.e, c.log, c.term
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
	err := e.conf.DB.Fenced(ctx, term.Fence(), func(tx *store.Tx) error {
		decided, outs, claimed, repairs, added = nil, nil, nil, nil, nil
		var err error
		if now, err = tx.NowOr(ctx, e.clock.nowOrNil()); err != nil {
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
		jobs := make([]catchUpJob, len(batch))
		walks := make([][]time.Time, len(batch))
		var ranges []store.SlotRange
		for i, en := range batch {
			if spent[en.conf.Name] {
				continue
			}
			jobs[i] = catchUpJob{sched: en.conf.Schedule, since: en.since, first: firsts[en.conf.Name],
				window: en.conf.Catchup, maxMissed: e.conf.MaxMissed, repairFrom: repairFrom}
			if walks[i] = catchUpWalk(jobs[i], now); walks[i] != nil {
				walk := walks[i]
				ranges = append(ranges, store.SlotRange{Job: en.conf.Name, From: walk[len(walk)-1], To: walk[0]})
			}
		}
		recorded, err := tx.RecordedSlotsIn(ctx, ranges)
		if err != nil {
			return err
		}
		var missedJobs []string
		var missedSlots []time.Time
		var claims []store.Claim
		for i, en := range batch {
			if walks[i] == nil {
				continue
			}
			d := &jobCatchUp{en: en, catchUpPlan: planCatchUp(jobs[i], walks[i], recorded[en.conf.Name], now)}
			for _, s := range d.missed {
				missedJobs, missedSlots = append(missedJobs, en.conf.Name), append(missedSlots, s)
			}
			if d.run {
				claims = append(claims, store.Claim{Job: en.conf.Name, ScheduledAt: d.latest, Trigger: store.TriggerCatchUp,
					MinGap: en.conf.MinGap, InstanceID: e.conf.InstanceID, DefinitionVersion: en.versionRef(), MaxRuns: en.conf.MaxRuns,
					Now: e.clock.nowOrNil()})
				claimed = append(claimed, d)
			}
			decided = append(decided, d)
			if len(d.repair) > 0 {
				repairs = append(repairs, repair{en: en, slots: d.repair})
			}
		}
		if added, err = tx.AddRunDaysFor(ctx, append(slices.Clip(missedSlots), claimSlots(claims)...)); err != nil {
			return err
		}
		if len(missedSlots) > 0 {
			written, err := tx.RecordMissedSlots(ctx, e.clock.nowOrNil(), missedJobs, missedSlots, e.conf.InstanceID)
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

// claimSlots lists the slots of claims.
func claimSlots(claims []store.Claim) []time.Time {
	slots := make([]time.Time, len(claims))
	for i, c := range claims {
		slots[i] = c.ScheduledAt
	}
	return slots
}
