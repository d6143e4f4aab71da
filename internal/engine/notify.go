package engine

import (
	"context"
	"fmt"

	"github.com/schedulerhq/scheduler/internal/notify"
	"github.com/schedulerhq/scheduler/internal/store"
)

// A job's notifications, the engine's half (docs/design.md, "Notifications to teams"): each
// event is recorded in the fenced transaction that records its fact — a run's final status
// (the finisher), the missed rows (catch-up, a claim that failed for its whole period), the
// automatic pause — so it exists exactly once per run and type however the leader dies. The
// leader's delivery service (internal/notify/deliver) sends them, at least once.

// notifyOn is the set of events the entry's rules want; empty for a job without any, which
// then costs no statement.
func (en *entry) notifyOn() notify.Events { return notify.EventsOf(en.conf.Notify) }

// NotifyRules are the notification rules of job as this leader runs it (a runtime job's
// current definition, a built-in job's configuration); false for a job it does not know
// (deleted since its events were recorded).
func (e *Engine) NotifyRules(job string) ([]notify.Rule, bool) {
	en := e.entry(job)
	if en == nil {
		return nil, false
	}
	return en.conf.Notify, true
}

// finishEvents records, in the finisher's transaction, the events of the runs it finished:
// failed and timed_out as such, and a succeeded run whose job's previous outcome was a
// failure as recovered.
func finishEvents(ctx context.Context, tx *store.Tx, rs []*finishRequest, done map[int64]bool) error {
	var events []store.NotificationEvent
	var succeeded []int64
	jobOf := map[int64]string{}
	for _, r := range rs {
		if !done[r.f.RunID] || r.notify == 0 {
			continue
		}
		switch status := r.f.Status; {
		case (status == store.StatusFailed || status == store.StatusTimedOut) && r.notify.Has(status):
			events = append(events, store.NotificationEvent{Job: r.job, Event: status, RunID: r.f.RunID})
		case status == store.StatusSucceeded && r.notify.Has(notify.Recovered):
			succeeded = append(succeeded, r.f.RunID)
			jobOf[r.f.RunID] = r.job
		}
	}
	recovered, err := tx.RecoveredRuns(ctx, succeeded)
	if err != nil {
		return err
	}
	for _, id := range recovered {
		events = append(events, store.NotificationEvent{Job: jobOf[id], Event: notify.Recovered, RunID: id})
	}
	_, err = tx.RecordNotifications(ctx, events)
	return err
}

// missedEvents records, in the transaction that wrote them, the missed rows of the jobs whose
// rules want them.
func (e *Engine) missedEvents(ctx context.Context, tx *store.Tx, written map[string][]int64) error {
	var events []store.NotificationEvent
	for job, ids := range written {
		en := e.entry(job)
		if en == nil || !en.notifyOn().Has(notify.Missed) {
			continue
		}
		for _, id := range ids {
			events = append(events, store.NotificationEvent{Job: job, Event: notify.Missed, RunID: id})
		}
	}
	_, err := tx.RecordNotifications(ctx, events)
	return err
}

// pausedEvent records the automatic pause after pause_after_failures, naming the run that
// made it, in the transaction that pauses the job.
func pausedEvent(ctx context.Context, tx *store.Tx, en *entry, runID int64, n int) error {
	if !en.notifyOn().Has(notify.Paused) {
		return nil
	}
	reason := fmt.Sprintf("paused after %d failed runs in a row (pause_after_failures)", n)
	_, err := tx.RecordNotifications(ctx, []store.NotificationEvent{{Job: en.conf.Name, Event: notify.Paused, RunID: runID, Detail: &reason}})
	return err
}
