package api

import (
	"encoding/json"
	"time"

	"github.com/schedulerhq/scheduler/client"
	"github.com/schedulerhq/scheduler/internal/config"
	"github.com/schedulerhq/scheduler/internal/namespace"
	"github.com/schedulerhq/scheduler/internal/store"
)

// The answers' shapes (api/openapi.yaml's schemas) are package client's: the API encodes
// the very types a client decodes.

func newAttemptViews(list []store.Attempt) []client.Attempt {
	views := make([]client.Attempt, len(list))
	for i, a := range list {
		views[i] = client.Attempt{Attempt: a.Number, StartedAt: a.StartedAt.UTC(), DurationMS: a.Duration.Milliseconds(),
			StatusCode: a.StatusCode, Body: a.Body, Error: a.Error}
	}
	return views
}

func newRunView(r *store.Run) *client.Run {
	if r == nil {
		return nil
	}
	stats, params := r.Stats, r.Params
	if len(stats) == 0 {
		stats = json.RawMessage(`{}`)
	}
	if len(params) == 0 {
		params = json.RawMessage(`{}`)
	}
	ns, job := namespace.Split(r.Job)
	return &client.Run{
		ID: r.ID, Job: job, Namespace: ns, Trigger: r.Trigger, Status: r.Status, ScheduledAt: utcPtr(r.ScheduledAt),
		StartedAt: utcPtr(r.StartedAt), FinishedAt: utcPtr(r.FinishedAt), DurationMS: r.DurationMS(),
		InstanceID: r.InstanceID, Epoch: r.Epoch, Stats: stats, Error: r.Error, Reason: r.Reason,
		Params: params, CreatedAt: r.CreatedAt.UTC(), CancelRequested: r.CancelRequested,
		RecoversRunID: r.RecoversRunID, DefinitionVersion: r.DefinitionVersion, NextAttemptAt: nextAttempt(r),
	}
}

// nextAttempt is a running run's next attempt time; a finished run has none, whatever the row
// says.
func nextAttempt(r *store.Run) *time.Time {
	if r.Status != store.StatusRunning {
		return nil
	}
	return utcPtr(r.NextAttemptAt)
}

// utcPtr shows times in UTC whatever the replica's zone, so every replica answers alike.
func utcPtr(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := t.UTC()
	return &u
}

// nextRunsShown is how many coming slots a job view lists.
const nextRunsShown = 5

// staticJobView is j's view without its state (paused, next runs, last run): what a
// replica may keep for as long as the job's definition keeps its version.
func staticJobView(j *jobRef) client.Job {
	c := &j.conf
	ns, name := namespace.Split(c.Name)
	v := client.Job{
		Name: name, Namespace: ns, Enabled: c.Enabled, Timeout: c.Timeout.String(),
		Catchup: c.Catchup.String(), MinGap: c.MinGap.String(), Kind: client.KindBuiltin, Schedules: []string{},
	}
	if c.Schedule != nil {
		v.Schedule, v.ScheduleText, v.TimeZone = c.Schedule.String(), c.Schedule.Text(), c.Schedule.Location().String()
		v.Schedules = c.Schedule.Specs()
	}
	if j.stored != nil {
		addRuntimeView(&v, j)
	} else {
		if c.Notify != nil {
			v.Notify = encodedJSON(c.Notify)
		}
	}
	return v
}

// withState is the job's view with its state, the next runs computed from now on the
// database's clock; ran is what ran of its slots (for max_runs).
func (jv *jobView) withState(now time.Time, paused bool, last *store.Run, ran store.RanRuns) client.Job {
	v := jv.static
	co := jv.coming(now, paused, ran)
	v.Paused, v.LastRun = paused, newRunView(last)
	v.Finished, v.NextRuns, v.NextRunsDST, v.Warnings = co.finished, co.runs, co.marks, co.warnings
	if len(v.NextRuns) > 0 {
		v.NextRunAt = &v.NextRuns[0]
	}
	return v
}

// computeNextRuns returns the next nextRunsShown slots of j's schedule after now.
func computeNextRuns(j *config.Job, now time.Time) []time.Time {
	runs := make([]time.Time, 0, nextRunsShown)
	for t := now; len(runs) < nextRunsShown; {
		if t = j.Schedule.Next(t); t.IsZero() {
			break
		}
		runs = append(runs, t.UTC())
	}
	return runs
}
