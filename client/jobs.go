package client

import (
	"encoding/json"
	"time"
)

// The API's answers, as api/openapi.yaml's schemas describe them. The API encodes these
// very types and the Client decodes them, so the two cannot drift apart.

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
	// Kind is "builtin" for a compiled job, else the runtime job's kind ("http", "sql", "nats", "river").
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
	Definition json.RawMessage `json:"definition,omitzero"`
	// Notify are a built-in job's notification rules (SCHEDULER_JOB_<NAME>_NOTIFY_*); a
	// runtime job's are in its Definition.
	Notify json.RawMessage `json:"notify,omitzero"`
	// DefinitionError says why a stored definition no longer passes the check (a row
	// written by hand, or under older rules); such a job does not run until replaced.
	DefinitionError string `json:"definition_error,omitzero"`
	// After are the job's parents, by name (its definition's after); Children the jobs
	// that name it as theirs (GET of one job only).
	After    []string `json:"after,omitzero"`
	Children []string `json:"children,omitzero"`
}

// KindBuiltin is the kind of a job compiled into the scheduler.
const KindBuiltin = "builtin"

// Runtime reports a job defined through the API (a definition with a version), not a
// built-in one. A view without a kind (a server older than runtime jobs) is not one.
func (j *Job) Runtime() bool { return j.Kind != "" && j.Kind != KindBuiltin }

// JobPage is a page of GET /v1/jobs: NextCursor, when not nil, continues it.
type JobPage struct {
	Jobs       []Job   `json:"jobs"`
	NextCursor *string `json:"next_cursor"`
	// Counts are the namespace's job health (?counts=true only).
	Counts *JobCounts `json:"counts,omitempty"`
	// NamespaceCounts are each namespace's counts (?namespace=*&counts=true only).
	NamespaceCounts []NamespaceJobCounts `json:"namespace_counts,omitempty"`
}

// SlotDST marks a slot of next_runs that a clock change moved or doubled.
type SlotDST struct {
	At time.Time `json:"at"`
	// Change is "moved" (not at its wall-clock time's first instant: shifted after a gap,
	// or the second of a repeated time) or "doubled" (a repeated time that runs twice).
	Change string `json:"change"`
	Note   string `json:"note"`
}

// JobCounts are the health of a namespace's jobs (?counts=true): every job of it, whatever
// the filters, and how many of them the filters match. A job may count in several states
// (paused and failing).
type JobCounts struct {
	Total    int `json:"total"`
	Failing  int `json:"failing"`
	Running  int `json:"running"`
	Paused   int `json:"paused"`
	Disabled int `json:"disabled"`
	Matched  int `json:"matched"`
}

// NamespaceJobCounts are one namespace's JobCounts in a list of every namespace's jobs.
type NamespaceJobCounts struct {
	Namespace string `json:"namespace"`
	JobCounts
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
	// ParentRunIDs are the parent runs a child's run (trigger after) came from, and
	// CausedRunIDs the child runs this run caused (GET /v1/runs/{id} only).
	ParentRunIDs []int64 `json:"parent_run_ids,omitzero"`
	CausedRunIDs []int64 `json:"caused_run_ids,omitzero"`
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

// Finished reports whether the run has ended: every status but queued and running is final.
func (r *Run) Finished() bool { return r.Status != "queued" && r.Status != "running" }

// RunPage is a page of a job's runs, newest first: NextCursor, when not nil, continues it.
type RunPage struct {
	NextCursor *string `json:"next_cursor"`
	Runs       []Run   `json:"runs"`
}
