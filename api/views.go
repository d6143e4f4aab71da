package api

import (
	"encoding/json"
	"time"

	"github.com/schedulerhq/scheduler/internal/config"
	"github.com/schedulerhq/scheduler/internal/definition"
	"github.com/schedulerhq/scheduler/internal/namespace"
	"github.com/schedulerhq/scheduler/internal/notify"
	"github.com/schedulerhq/scheduler/internal/store"
)

// The answers' shapes (api/openapi.yaml's schemas) are package client's: the API encodes
// the very types a client decodes.

func newAttemptViews(list []store.Attempt) []Attempt {
	views := make([]Attempt, len(list))
	for i, a := range list {
		views[i] = Attempt{Attempt: a.Number, StartedAt: a.StartedAt.UTC(), DurationMS: a.Duration.Milliseconds(),
			StatusCode: a.StatusCode, Body: a.Body, Error: a.Error}
	}
	return views
}

func newRunView(r *store.Run) *Run {
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
	return &Run{
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
func staticJobView(j *jobRef) Job {
	c := &j.conf
	ns, name := namespace.Split(c.Name)
	v := Job{
		Name: name, Namespace: ns, Enabled: c.Enabled, Timeout: c.Timeout.String(),
		Catchup: c.Catchup.String(), MinGap: c.MinGap.String(), Kind: KindBuiltin, Schedules: []string{},
	}
	if c.Schedule != nil {
		v.Schedule, v.ScheduleText, v.TimeZone = c.Schedule.String(), c.Schedule.Text(), c.Schedule.Location().String()
		v.Schedules = c.Schedule.Specs()
	}
	if j.stored != nil {
		addRuntimeView(&v, j)
	} else {
		v.Notify = c.Notify
	}
	return v
}

// withState is the job's view with its state, the next runs computed from now on the
// database's clock; ran is what ran of its slots (for max_runs).
func (jv *jobView) withState(now time.Time, paused bool, last *store.Run, ran store.RanRuns) Job {
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

// Run is a run as the API shows it.
type Run struct {
	ID              int64           `json:"id"`
	Job             string          `json:"job"`
	Namespace       string          `json:"namespace"`
	Trigger         string          `json:"trigger"`
	Status          string          `json:"status"`
	ScheduledAt     *time.Time      `json:"scheduled_at"`
	StartedAt       *time.Time      `json:"started_at"`
	FinishedAt      *time.Time      `json:"finished_at"`
	DurationMS      *int64          `json:"duration_ms"`
	InstanceID      *string         `json:"instance_id"`
	Epoch           *int64          `json:"epoch"`
	Stats           json.RawMessage `json:"stats"`
	Error           *string         `json:"error"`
	Reason          *string         `json:"reason"`
	Params          json.RawMessage `json:"params"`
	CreatedAt       time.Time       `json:"created_at"`
	CancelRequested bool            `json:"cancel_requested"`
	RecoversRunID   *int64          `json:"recovers_run_id"`
	// DefinitionVersion is the version of a runtime job's definition the run ran; null for
	// a built-in job, and for a run not started yet.
	DefinitionVersion *int64 `json:"definition_version"`
	// NextAttemptAt is when a running runtime HTTP job's next call attempt starts, while
	// it waits out the backoff after a failed one; null otherwise.
	NextAttemptAt *time.Time `json:"next_attempt_at"`
	// Attempts are a runtime HTTP job's call attempts: GET /v1/runs/{id} always sets them
	// (empty for other jobs); lists of runs leave them out.
	Attempts []Attempt `json:"attempts,omitzero"`
	// Output is what a callback job's target reported with its completion (its first
	// 4 KiB); GET /v1/runs/{id} sets it when there is one.
	Output *string `json:"output,omitempty"`
}

// Attempt is one call attempt of a runtime HTTP job's run.
type Attempt struct {
	Attempt    int       `json:"attempt"`
	StartedAt  time.Time `json:"started_at"`
	DurationMS int64     `json:"duration_ms"`
	// StatusCode is null when no answer came (Error says why).
	StatusCode *int `json:"status_code"`
	// Body is the first 4 KiB of the answer's body.
	Body  *string `json:"body"`
	Error *string `json:"error"`
}

// Job is a job's configuration and state.
type Job struct {
	Name      string `json:"name"`
	Namespace string `json:"namespace"`
	Schedule  string `json:"schedule"`
	Enabled   bool   `json:"enabled"`
	Paused    bool   `json:"paused"`
	// Durations are Go duration strings, as in the SCHEDULER_JOB_<NAME>_* variables.
	Timeout string `json:"timeout"`
	Catchup string `json:"catchup"`
	MinGap  string `json:"min_gap"`
	// ScheduleText says the schedule in plain words ("every day at 02:00 UTC").
	ScheduleText string `json:"schedule_text"`
	// TimeZone is the zone of the schedule's wall-clock times (CRON_TZ, else UTC).
	TimeZone string `json:"time_zone"`
	// Schedules are the schedule's specs: its one spec (then Schedule is it), or those of
	// its list (then Schedule joins them with "; ").
	Schedules []string `json:"schedules"`
	// Finished says the schedule names no slot any more: its one-time slot, its end_at or
	// its max_runs is behind it. Such a job stays listed, and runs only when triggered.
	Finished bool `json:"finished"`
	// NextRunAt is the next slot on the database clock; null while disabled, paused or
	// finished.
	NextRunAt *time.Time `json:"next_run_at"`
	// NextRuns are the next nextRunsShown slots (fewer when max_runs leaves fewer); empty
	// while disabled, paused or finished.
	NextRuns []time.Time `json:"next_runs"`
	// NextRunsDST marks the next runs a clock change moved or doubled (a DST policy's).
	NextRunsDST []SlotDST `json:"next_runs_dst"`
	// Warnings say what the clock changes of the next twelve months do to the schedule
	// (from its start_at when that is later), one per change it meets.
	Warnings []string `json:"warnings"`
	LastRun  *Run     `json:"last_run"`
	// Kind is "builtin" for a compiled job, else the runtime job's kind ("http", "sql").
	Kind string `json:"kind"`

	// The rest is a runtime job's only (absent for a built-in job).

	// Version counts the definition's changes; PUT and DELETE take it in If-Match.
	Version     *int64            `json:"version,omitzero"`
	Description *string           `json:"description,omitzero"`
	Labels      map[string]string `json:"labels,omitzero"`
	// Target is what the job calls or runs, in one line for lists:
	// "POST https://billing.internal/reports/daily", "SQL: REFRESH MATERIALIZED VIEW ...".
	Target  string `json:"target,omitzero"`
	Overlap string `json:"overlap,omitzero"`
	// Definition is the normalised definition as stored: it names secrets and never holds
	// their values (it has none to hold).
	Definition *definition.Definition `json:"definition,omitzero"`
	// Notify are a built-in job's notification rules (SCHEDULER_JOB_<NAME>_NOTIFY_*); a
	// runtime job's are in its Definition.
	Notify []notify.Rule `json:"notify,omitzero"`
	// DefinitionError says why a stored definition no longer passes the check (a row
	// written by hand, or under older rules); such a job does not run until replaced.
	DefinitionError string `json:"definition_error,omitzero"`
}

// KindBuiltin is the kind of a compiled job.
const KindBuiltin = "builtin"
