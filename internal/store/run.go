package store

import (
	"encoding/json"
	"time"
)

// Run statuses and triggers (DESIGN.md, "A run").
const (
	StatusQueued    = "queued"
	StatusRunning   = "running"
	StatusSucceeded = "succeeded"
	StatusFailed    = "failed"
	StatusSkipped   = "skipped"
	StatusTimedOut  = "timed_out"
	StatusAbandoned = "abandoned"
	StatusCancelled = "cancelled"
	StatusMissed    = "missed"

	TriggerSchedule = "schedule"
	TriggerManual   = "manual"
	TriggerCatchUp  = "catch-up"
	TriggerRecovery = "recovery"
)

// Run is one row of job_runs. Its JSON shape is the API's (api/views.go), not this struct's.
type Run struct {
	ID              int64
	Job             string
	Trigger         string
	Status          string
	ScheduledAt     *time.Time
	CreatedAt       time.Time
	StartedAt       *time.Time
	FinishedAt      *time.Time
	InstanceID      *string
	Epoch           *int64
	Stats           json.RawMessage
	Error           *string
	Reason          *string
	Params          json.RawMessage
	RecoversRunID   *int64
	CancelRequested bool
}

// DurationMS is finished_at - started_at in milliseconds, nil while unfinished.
func (r *Run) DurationMS() *int64 {
	if r.StartedAt == nil || r.FinishedAt == nil {
		return nil
	}
	ms := r.FinishedAt.Sub(*r.StartedAt).Milliseconds()
	return &ms
}

// Finished reports whether the run reached a final status.
func (r *Run) Finished() bool {
	return r.Status != StatusQueued && r.Status != StatusRunning
}

// RunColumns lists job_runs' columns in the order ScanRun expects.
const RunColumns = `id, job, trigger, status, scheduled_at, created_at, started_at, finished_at,
	instance_id, epoch, stats, error, reason, params, recovers_run_id, cancel_requested`

// ScanRun scans one row selected with RunColumns.
func ScanRun(row interface{ Scan(...any) error }) (*Run, error) {
	var r Run
	err := row.Scan(&r.ID, &r.Job, &r.Trigger, &r.Status, &r.ScheduledAt, &r.CreatedAt, &r.StartedAt,
		&r.FinishedAt, &r.InstanceID, &r.Epoch, &r.Stats, &r.Error, &r.Reason, &r.Params,
		&r.RecoversRunID, &r.CancelRequested)
	if err != nil {
		return nil, err
	}
	return &r, nil
}
