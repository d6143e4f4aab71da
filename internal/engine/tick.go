package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/schedulerhq/scheduler/internal/backoff"
	"github.com/schedulerhq/scheduler/internal/leader"
	"github.com/schedulerhq/scheduler/internal/runtimejob"
	"github.com/schedulerhq/scheduler/internal/store"
)

// tick claims one slot and starts its run if the claim won (docs/design.md guarantee 10). A
// claim that fails while this replica leads is retried until the slot's period ends (the
// next slot comes due); a slot that still could not be claimed is then recorded missed,
// retried until the database answers or the term ends. A claim whose commit reached the
// server while its answer was lost comes back as taken: its row is running with nobody
// running it, which the rescuer finds.
//
// ahead, above 0, is how long before the slot the timer fired (timers.go): the claim is made
// then, and a run that wins starts at the slot. A job that waits for idle runs or has a
// jitter claims at its slot, as does a claim ahead that did not win outright.
func (e *Engine) tick(ctx context.Context, term leader.Term, claims *claimer, log *slog.Logger, en *entry, slot time.Time, trigger string, ahead time.Duration) {
	if e.passOver(en, slot) {
		return
	}
	log = log.With("job", en.conf.Name, "scheduled_at", slot, "trigger", trigger)
	periodEnd := en.conf.Schedule.Next(slot)
	if ahead > 0 && (en.waitsForIdle() || en.def != nil && en.def.Offset() > 0) {
		backoff.Sleep(ctx, time.Until(slot))
		ahead = 0
	}
	if en.def != nil {
		// The job's fixed jitter spreads the calls of jobs sharing a slot; the slot keeps
		// its nominal time.
		if off := en.def.Offset(); off > 0 {
			backoff.Sleep(ctx, time.Until(slot.Add(off)))
		}
	}
	// A queue-one or replace job keeps one slot waiting for its active run to end; the
	// slots after it are skipped as overlaps, as for every other job.
	mode := claimSkips
	if en.waitsForIdle() && en.waiting.CompareAndSwap(false, true) {
		defer en.waiting.Store(false)
		mode = claimWaits
		if en.overlap() == runtimejob.OverlapReplace {
			mode = claimReplaces
		}
	}
	waiting, missed := false, false
	err := retryWhileLeading(ctx, func() error {
		err := claims.claim(ctx, log, en, slot, trigger, mode, ahead)
		var early *earlyError
		switch {
		case ahead > 0 && errors.As(err, &early):
			// Claimed ahead without winning outright: claimed again at the slot.
			backoff.Sleep(ctx, early.by)
			ahead = 0
			return backoff.ErrAgain
		case errors.Is(err, errBusy):
			if !waiting {
				log.Info("the job is still running; the slot waits for its run to end", "overlap", en.overlap())
				waiting = true
			}
			e.awaitIdle(ctx, en.conf.Name)
			return backoff.ErrAgain
		case errors.As(err, &early):
			// This replica's clock runs ahead of the database's: the slot has not come yet.
			log.Warn("the slot is still in the future by the database clock; claiming it when it comes",
				"early_by", early.by)
			backoff.Sleep(ctx, early.by)
			return backoff.ErrAgain
		}
		return err
	}, func(err error, d time.Duration) error {
		if missed = !periodEnd.IsZero() && time.Now().Add(d).After(periodEnd); missed {
			return err
		}
		log.Warn("claiming the slot failed; retrying within its period", "error", err, "retry_in", d)
		return nil
	})
	switch {
	case missed:
		log.Warn("claiming the slot kept failing for its whole period; recording it missed", "error", err)
		e.recordMissed(ctx, term, log, en, slot)
	case err != nil:
		// The next leader's catch-up sees the slot without a row.
		log.Info("the term ended before the slot could be claimed", "error", err)
	}
}

// retryWhileLeading calls op until it succeeds, with a backoff from retryMin to retryMax,
// while the term lasts: it gives up with the error once the term's ctx ends or the fence
// refuses (store.ErrNotLeader). onRetry logs before each delay, and may give up instead.
func retryWhileLeading(ctx context.Context, op func() error, onRetry func(err error, d time.Duration) error) error {
	return backoff.Retry(ctx, retryMin, retryMax, func() error {
		err := op()
		if errors.Is(err, store.ErrNotLeader) {
			return backoff.Stop(err)
		}
		return err
	}, onRetry)
}

// claimed acts on a claim's outcome: it starts the run of a won claim (the caller holds
// claiming) and returns earlyError or errBusy for the claims tick must try again.
func (e *Engine) claimed(ctx context.Context, term leader.Term, log *slog.Logger, en *entry, trigger string, slot time.Time, out store.ClaimOutcome) error {
	switch {
	case out.Early > 0:
		return &earlyError{by: out.Early}
	case out.Busy:
		e.replaced(log, out)
		return errBusy
	case out.Taken:
		log.Debug("slot already claimed")
	case out.Finished:
		e.spent(log, en, slot)
	case out.Skipped != "":
		log.Info("slot skipped", "run_id", out.SkippedID, "reason", out.Skipped)
		e.conf.Metrics.RunRecorded(en.conf.Name, store.StatusSkipped, trigger)
		e.conf.Metrics.SetJobPaused(en.conf.Name, out.Skipped == store.ReasonPaused)
	default:
		e.replaced(log, out)
		log.Info("slot claimed", "run_id", out.Run.ID)
		// The claim read job_settings: a claimed slot means the job is not paused.
		e.conf.Metrics.SetJobPaused(en.conf.Name, false)
		var notBefore time.Time
		if out.ClaimedAhead {
			notBefore = time.Now().Add(out.StartIn) // the slot, by this replica's clock
		}
		e.startAt(ctx, term, en, out.Run, notBefore)
	}
	return nil
}

// errBusy is a queue-one claim of a slot that came due while the job runs.
var errBusy = errors.New("the job has an active run")

// earlyError is a claim of a slot that has not come yet by the database's clock.
type earlyError struct{ by time.Duration }

func (e *earlyError) Error() string { return fmt.Sprintf("the slot is %s in the future", e.by) }

// recordMissed records a slot that could not be claimed in its period as missed, as soon as
// the database answers again, so it is never silently lost.
func (e *Engine) recordMissed(ctx context.Context, term leader.Term, log *slog.Logger, en *entry, slot time.Time) {
	var n int
	err := retryWhileLeading(ctx, func() error {
		return e.conf.DB.Fenced(ctx, term.Fence(), func(tx *store.Tx) error {
			ids, err := tx.RecordMissed(ctx, e.clock.nowOrNil(), en.conf.Name, []time.Time{slot}, e.conf.InstanceID)
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
