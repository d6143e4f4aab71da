package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/schedulerhq/scheduler/internal/backoff"
	"github.com/schedulerhq/scheduler/internal/config"
	"github.com/schedulerhq/scheduler/internal/leader"
	"github.com/schedulerhq/scheduler/internal/store"
)

// A PostgreSQL failover with asynchronous replication loses the commits the standby had not
// received: claims of slots whose calls were made and answered, their ends, whole elections.
// The promoted database then shows those slots without a row, and the catch-up would record
// them missed: false history, and for a job whose work was lost, work silently not done. A
// term that finds the database failed over (leader.Term.FailedOver) repairs a bounded window
// before its election instead: each unrecorded slot in it is caught up under the slot's own
// key (trigger catch-up, the same Idempotency-Key the lost call carried), so a target that
// deduplicates applies it once, and none is recorded missed (docs/design.md, "Failover of
// PostgreSQL").

// repair is one job's unrecorded slots in the failover window, oldest first.
type repair struct {
	en    *entry
	slots []time.Time
}

// repairFrom is where the failover window of term begins, or zero when the term found no
// failover.
func (e *Engine) repairFrom(term leader.Term) time.Time {
	if term.FailedOver == "" {
		return time.Time{}
	}
	window := e.conf.FailoverWindow
	if window <= 0 {
		window = config.FailoverWindowDefault
	}
	return term.Since.Add(-window)
}

// first is the rescuer's pass at its term's start: it ends what earlier terms left running
// before the term claims anything. After a failover it tries again when it fails
// (retryAfterFailover): a run of a lost term, its claim kept and its end lost, would
// otherwise count against its job's bound of active runs while the window is repaired, and
// the slots behind it would wait for a run nobody runs, or be recorded skipped, though they
// were called. Ended, it is abandoned and redone by its recovery run under its slot's key,
// as the repair does a slot without a row. Other terms leave a failed pass to the rescuer's
// next one.
func (r *rescuer) first(ctx context.Context) {
	_ = retryAfterFailover(ctx, r.term, func() error { return r.pass(ctx) }) // each failure is logged
}

// failoverAttempts bounds how often a term that found a failover tries what must come before
// its repair (the rescue, a job's catch-up): the first statements after a failover often meet
// pooled connections that died with the old primary, but a fault that persists must not
// keep the term from running every other job (8 attempts: at most about 11 s of backoff).
const failoverAttempts = 8

// retryAfterFailover calls op once, or, for a term that found a failover, up to
// failoverAttempts times with backoff while the term lasts.
func retryAfterFailover(ctx context.Context, term leader.Term, op func() error) error {
	if term.FailedOver == "" {
		return op()
	}
	attempts := 1
	return retryWhileLeading(ctx, op, func(err error, _ time.Duration) error {
		if attempts++; attempts > failoverAttempts {
			return err
		}
		return nil
	})
}

// repairFailover reports the failover term found (a WARN line, scheduler_failovers_total,
// an audit row failover with the window) and starts the repair of each job's slots: one
// goroutine per job, its slots one after another, since a job never has two active runs.
func (e *Engine) repairFailover(ctx context.Context, term leader.Term, log *slog.Logger, claims *claimer, repairs []repair) {
	from := e.repairFrom(term)
	if from.IsZero() {
		return
	}
	slots := 0
	for _, r := range repairs {
		slots += len(r.slots)
	}
	log.Warn("PostgreSQL failed over since the previous term: commits of earlier terms may be lost; "+
		"catching up every unrecorded slot of the window under its own key instead of recording it missed",
		"why", term.FailedOver, "window_from", from, "window_to", term.Since, "jobs", len(repairs), "slots", slots)
	e.conf.Metrics.FailedOver()
	e.auditFailover(ctx, term, log, from, len(repairs), slots)
	for _, r := range repairs {
		e.runs.Add(1)
		go func() {
			defer e.runs.Done()
			for _, slot := range r.slots {
				e.repairSlot(ctx, claims, log.With("job", r.en.conf.Name, "scheduled_at", slot,
					"trigger", store.TriggerCatchUp, "failover_repair", true), r.en, slot)
			}
		}()
	}
	e.testSignals.repaired.Send(slots)
}

// auditFailover writes the failover's audit row, so operators find the window whose calls
// may have been made twice (under the same key).
func (e *Engine) auditFailover(ctx context.Context, term leader.Term, log *slog.Logger, from time.Time, jobs, slots int) {
	detail, _ := json.Marshal(map[string]any{"window_from": from, "window_to": term.Since, "why": term.FailedOver,
		"epoch": term.Epoch, "term_id": term.TermID, "jobs": jobs, "slots": slots})
	reason := fmt.Sprintf("the database failed over (%s); repaired %d slots of %d jobs from %s to %s",
		term.FailedOver, slots, jobs, from.UTC().Format(time.RFC3339), term.Since.UTC().Format(time.RFC3339))
	err := e.conf.DB.Fenced(ctx, term.Fence(), func(tx *store.Tx) error {
		return tx.RecordAction(ctx, store.Action{Action: store.ActionFailover, TokenKind: "engine", Reason: &reason,
			RequestID: fmt.Sprintf("term-%d-%s", term.Epoch, term.TermID), RemoteAddr: e.conf.InstanceID, Detail: detail})
	})
	if err != nil && ctx.Err() == nil {
		log.Error("recording the failover in the audit log failed; the log line above is its record", "error", err)
	}
}

// repairSlot claims slot as a catch-up run once the job has room for it (a waiting claim:
// it neither records the slot skipped as an overlap nor replaces a run), and starts it.
// A slot another path recorded meanwhile is taken, and left alone. It retries while the
// term lasts and never records the slot missed: the lost term may have called it.
//
// A SQL job's slot whose run committed on its target before the failover left its marker
// there, under the slot's key: the repair run finds it and records the slot succeeded
// (stats already_applied) without running the statements again (targets.SQLTarget.Run).
func (e *Engine) repairSlot(ctx context.Context, claims *claimer, log *slog.Logger, en *entry, slot time.Time) {
	err := retryWhileLeading(ctx, func() error {
		err := claims.claim(ctx, log, en, slot, store.TriggerCatchUp, claimWaits, 0)
		var early *earlyError
		switch {
		case errors.Is(err, errBusy):
			e.awaitIdle(ctx, en.conf.Name)
			return backoff.ErrAgain
		case errors.As(err, &early):
			backoff.Sleep(ctx, early.by)
			return backoff.ErrAgain
		}
		return err
	}, func(err error, d time.Duration) error {
		log.Warn("claiming a slot of the failover window failed; retrying", "error", err, "retry_in", d)
		return nil
	})
	if err != nil {
		log.Info("the term ended before the slot was repaired; the next leader finds it unrecorded", "error", err)
	}
}
