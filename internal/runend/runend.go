// Package runend decides what the end of a run means: the notification events its job's rules
// want and the automatic pause after pause_after_failures. Every recorded end passes here, in
// the transaction that recorded it (the store's one end statement, store/runs_end.go): the
// leader's finisher and callback watch (internal/engine), and a callback's completion on any
// replica's API. So an event and a pause exist exactly when their end does, and read the same
// whichever way the run ended. The rules come from the job's loaded definition, as Go values.
package runend

import (
	"context"
	"errors"
	"fmt"

	"github.com/schedulerhq/scheduler/internal/notify"
	"github.com/schedulerhq/scheduler/internal/runtimejob"
	"github.com/schedulerhq/scheduler/internal/store"
)

// Rules is what a job's definition says about the ends of its runs.
type Rules struct {
	Notify             notify.Events // the events its notification rules want
	PauseAfterFailures int           // 0: never paused
}

// Of is the rules of a runtime job's definition.
func Of(d runtimejob.Definition) Rules {
	return Rules{Notify: notify.EventsOf(d.Notify), PauseAfterFailures: d.PauseAfterFailures}
}

// Load reads the rules of the runtime job from its stored definition, inside ex's
// transaction, loaded as the leader loads it (definition.Load): for a replica that does not
// run the job (the API receiving a completion). A job deleted since has none, and so has one
// whose definition no longer loads, as the leader, which then does not run it, has none.
func Load(ctx context.Context, ex store.Executor, job string) (Rules, error) {
	stored, err := ex.Definition(ctx, job)
	if errors.Is(err, store.ErrDefinitionNotFound) {
		return Rules{}, nil
	}
	if err != nil {
		return Rules{}, err
	}
	checked, _, err := runtimejob.Load(stored.Definition)
	if err != nil {
		return Rules{}, nil // the leader refuses it too, and says why when it loads it
	}
	return Of(checked.Def), nil
}

// End is a recorded end and its job's rules.
type End struct {
	store.Ended
	Rules Rules
}

// Paused is a job an end paused, after After failed runs in a row, the last RunID.
type Paused struct {
	Job   string
	RunID int64
	After int
}

// pauseReason is the automatic pause's reason, in its event and its audit row.
func pauseReason(n int) string {
	return fmt.Sprintf("paused after %d failed runs in a row (pause_after_failures)", n)
}

// pauseAdvice ends the audit row's reason: what the operator does next.
const pauseAdvice = "; resume it once the target works"

// Record records, in ex's transaction (the one that recorded ends), what the ends mean:
// failed and timed_out as such and a success after a failure as recovered, for the jobs
// whose rules want them; and, for a job whose last pause_after_failures runs all failed or
// timed out, its pause, its audit row (as instance) and its paused event. Cancelled,
// abandoned and skipped runs mean nothing here. It returns the jobs it paused.
func Record(ctx context.Context, ex store.Executor, ends []End, instance string) ([]Paused, error) {
	var events []store.NotificationEvent
	var succeeded []int64
	jobOf := map[int64]string{}
	failedLast := map[string]End{} // per job with a pause bound, its last failure
	var failing []string
	for _, x := range ends {
		switch x.Status {
		case store.StatusFailed, store.StatusTimedOut:
			if x.Rules.Notify.Has(x.Status) {
				events = append(events, store.NotificationEvent{Job: x.Job, Event: x.Status, RunID: x.ID})
			}
			if x.Rules.PauseAfterFailures > 0 {
				if _, seen := failedLast[x.Job]; !seen {
					failing = append(failing, x.Job)
				}
				failedLast[x.Job] = x
			}
		case store.StatusSucceeded:
			if x.Rules.Notify.Has(notify.Recovered) {
				succeeded = append(succeeded, x.ID)
				jobOf[x.ID] = x.Job
			}
		}
	}
	recovered, err := ex.RecoveredRuns(ctx, succeeded)
	if err != nil {
		return nil, err
	}
	for _, id := range recovered {
		events = append(events, store.NotificationEvent{Job: jobOf[id], Event: notify.Recovered, RunID: id})
	}
	var paused []Paused
	for _, job := range failing {
		x := failedLast[job]
		p, ok, err := pauseIfFailing(ctx, ex, x, instance)
		if err != nil {
			return nil, err
		}
		if !ok {
			continue
		}
		paused = append(paused, p)
		if x.Rules.Notify.Has(notify.Paused) {
			reason := pauseReason(p.After)
			events = append(events, store.NotificationEvent{Job: job, Event: notify.Paused, RunID: x.ID, Detail: &reason})
		}
	}
	if _, err := ex.RecordNotifications(ctx, events); err != nil {
		return nil, err
	}
	return paused, nil
}

// pauseIfFailing pauses x's job when its last pause_after_failures runs, x the last, all
// failed, with its audit row.
func pauseIfFailing(ctx context.Context, ex store.Executor, x End, instance string) (Paused, bool, error) {
	n := x.Rules.PauseAfterFailures
	failing, err := ex.ConsecutiveFailures(ctx, x.Job, n)
	if err != nil || !failing {
		return Paused{}, false, err
	}
	if err := ex.SetPaused(ctx, x.Job, true); err != nil {
		return Paused{}, false, err
	}
	job, runID := x.Job, x.ID
	reason := pauseReason(n) + pauseAdvice
	err = ex.RecordAction(ctx, store.Action{Action: store.ActionAutoPause, Job: &job, RunID: &runID,
		TokenKind: "engine", Reason: &reason, RequestID: fmt.Sprintf("run-%d", runID), RemoteAddr: instance})
	if err != nil {
		return Paused{}, false, err
	}
	return Paused{Job: job, RunID: runID, After: n}, true, nil
}

// Complete ends a callback run with its target's completion, on any replica
// (store.DB.CompleteCallback), and records what the end means, from the job's stored
// definition, in the completion's transaction.
func Complete(ctx context.Context, db *store.DB, c store.Completion, instance string) (store.CallbackOutcome, *store.Run, []Paused, error) {
	var paused []Paused
	out, run, err := db.CompleteCallback(ctx, c, func(ex store.Executor, x store.Ended) error {
		rules, err := Load(ctx, ex, x.Job)
		if err != nil {
			return err
		}
		paused, err = Record(ctx, ex, []End{{Ended: x, Rules: rules}}, instance)
		return err
	})
	return out, run, paused, err
}
