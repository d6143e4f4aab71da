package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/schedulerhq/scheduler/internal/store"
)

// Backfills: the leader runs each running backfill's slots one at a time, in order. A slot's
// run is queued (trigger backfill, under the slot's scheduled_at, so with the slot's
// Idempotency-Key) in the transaction that moves the backfill past it, so a leader that dies
// between the two neither loses nor repeats a slot; the next slot is queued once that run has
// ended, and only while the job has no other active run (one at a time per job). A new
// leader picks the backfills up where the database says they are.

// backfillIntervalDefault is how often the leader looks at the running backfills.
const backfillIntervalDefault = 250 * time.Millisecond

// errBackfillWait rolls back a step that cannot go on yet (the job has an active run, or
// another leader moved the backfill).
var errBackfillWait = errors.New("the backfill waits")

// backfiller is the leader service that steps the running backfills every interval.
type backfiller struct {
	e        *Engine
	log      *slog.Logger
	interval time.Duration
}

func (s *backfiller) run(ctx context.Context) {
	ticker := time.NewTicker(s.interval)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
		s.pass(ctx)
	}
}

// pass steps each running backfill once; it ends with the backfillPass test signal,
// carrying how many backfills it read, unless the read failed.
func (s *backfiller) pass(ctx context.Context) {
	log := s.log
	list, err := s.e.conf.DB.RunningBackfills(ctx)
	if err != nil {
		if ctx.Err() == nil {
			log.Warn("reading the running backfills failed; they wait", "error", err)
		}
		return
	}
	for _, b := range list {
		if err := s.step(ctx, log.With("backfill_id", b.ID, "job", b.Job), b); err != nil && ctx.Err() == nil {
			log.Warn("a backfill step failed; it is tried again", "backfill_id", b.ID, "job", b.Job, "error", err)
		}
	}
	s.e.testSignals.backfillPass.Send(len(list))
}

// jobDeleted reports whether job is neither a built-in job nor a stored definition: the
// backfills of every partition are stepped here, and another partition's jobs are not
// loaded on this engine.
func (s *backfiller) jobDeleted(ctx context.Context, job string) (bool, error) {
	if s.e.entry(job) != nil {
		return false, nil
	}
	_, err := s.e.conf.DB.Definition(ctx, job)
	if errors.Is(err, store.ErrDefinitionNotFound) {
		return true, nil
	}
	return false, err
}

// step queues b's next slot once its previous run has ended, or ends b after its last.
func (s *backfiller) step(ctx context.Context, log *slog.Logger, b store.Backfill) error {
	e := s.e
	if b.RunID != nil {
		run, err := e.conf.DB.Run(ctx, *b.RunID)
		if err != nil && !errors.Is(err, store.ErrRunNotFound) {
			return err
		}
		if run != nil && !run.Finished() {
			return nil
		}
	}
	deleted, err := s.jobDeleted(ctx, b.Job)
	if err != nil {
		return err
	}
	if b.Next >= len(b.Slots) || deleted {
		state := store.BackfillDone
		if b.Next < len(b.Slots) {
			state = store.BackfillCancelled // the job was deleted
		}
		if _, err := e.conf.DB.EndBackfill(ctx, b.ID, state); err != nil && !errors.Is(err, store.ErrBackfillNotFound) {
			return err
		}
		log.Info("backfill ended", "state", state, "slots", len(b.Slots), "done", b.Next)
		return nil
	}
	slot := b.Slots[b.Next]
	reason := fmt.Sprintf("backfill %d: slot %d of %d", b.ID, b.Next+1, len(b.Slots))
	var queued *store.Run
	err = e.conf.DB.Atomically(ctx, func(ex store.Executor) error {
		run, created, err := ex.QueueSlotRun(ctx, b.Job, slot, store.TriggerBackfill, &reason, nil)
		var runID *int64
		switch {
		case errors.Is(err, store.ErrSlotTooOld):
			log.Warn("a backfill slot is past the run history's retention; passed over", "scheduled_at", slot)
		case err != nil:
			return err
		case !created:
			return errBackfillWait
		default:
			queued, runID = run, &run.ID
		}
		ok, err := ex.AdvanceBackfill(ctx, b.ID, b.Next, runID)
		if err == nil && !ok {
			err = errBackfillWait
		}
		return err
	})
	if errors.Is(err, errBackfillWait) {
		return nil
	}
	if err == nil && queued != nil {
		log.Info("backfill slot queued", "scheduled_at", slot, "run_id", queued.ID, "slot", b.Next+1, "slots", len(b.Slots))
	}
	return err
}
