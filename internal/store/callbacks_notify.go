package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/schedulerhq/scheduler/internal/notify"
)

// completionEvents records, in the transaction of a callback run's completion, the
// notification events the leader's finisher records for the runs it ends (engine/notify.go):
// failed, or recovered for the first success after a failure, and paused when the completion
// paused the job after pauseAfter failures (0: it did not). The completion reaches any
// replica's API, which does not hold the job's rules: they are read from its definition, in
// the same transaction, so an event exists exactly when its fact does.
func completionEvents(ctx context.Context, q queries, run *Run, status string, pauseAfter int) error {
	var raw []byte
	err := q.q.QueryRow(ctx, `SELECT definition->'notify' FROM job_definitions WHERE name = $1`, run.Job).Scan(&raw)
	if errors.Is(err, pgx.ErrNoRows) || (err == nil && raw == nil) {
		return nil // a job deleted since, or without rules
	}
	if err != nil {
		return fmt.Errorf("read %s's notification rules: %w", run.Job, err)
	}
	var rules []notify.Rule
	if err := json.Unmarshal(raw, &rules); err != nil {
		return fmt.Errorf("decode %s's notification rules: %w", run.Job, err)
	}
	on := notify.EventsOf(rules)
	var events []NotificationEvent
	switch {
	case status == StatusFailed && on.Has(notify.Failed):
		events = append(events, NotificationEvent{Job: run.Job, Event: notify.Failed, RunID: run.ID})
	case status == StatusSucceeded && on.Has(notify.Recovered):
		recovered, err := q.RecoveredRuns(ctx, []int64{run.ID})
		if err != nil {
			return err
		}
		if len(recovered) > 0 {
			events = append(events, NotificationEvent{Job: run.Job, Event: notify.Recovered, RunID: run.ID})
		}
	}
	if pauseAfter > 0 && on.Has(notify.Paused) {
		// The words of the leader's automatic pause (engine/notify.go, pausedEvent).
		reason := fmt.Sprintf("paused after %d failed runs in a row (pause_after_failures)", pauseAfter)
		events = append(events, NotificationEvent{Job: run.Job, Event: notify.Paused, RunID: run.ID, Detail: &reason})
	}
	_, err = q.RecordNotifications(ctx, events)
	return err
}
