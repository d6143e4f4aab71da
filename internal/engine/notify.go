package engine

import (
	"context"

	"github.com/schedulerhq/scheduler/internal/notify"
	"github.com/schedulerhq/scheduler/internal/store"
)

// A job's notifications, the engine's half (docs/design.md, "Notifications to teams"): each
// event is recorded in the fenced transaction that records its fact — a run's final status
// and the automatic pause (internal/runend, with every end: ends.go), the missed rows
// (catch-up, a claim that failed for its whole period) — so it exists exactly once per run
// and type however the leader dies. The leader's delivery service (internal/notify/deliver)
// sends them, at least once.

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
