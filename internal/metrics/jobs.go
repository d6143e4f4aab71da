package metrics

import (
	"time"

	jobns "github.com/schedulerhq/scheduler/internal/namespace"
)

// A job's own series: its last success, expected period, pause and unrecorded slots.

// SetLastSuccess sets the job's last success time from the database (the newest succeeded
// run's finished_at), so a replica that has just become leader, or just restarted, reports
// the cluster's history instead of nothing.
func (m *Metrics) SetLastSuccess(job string, at time.Time) {
	if m == nil || at.IsZero() {
		return
	}
	job, own := m.jobs.label(job)
	if !own {
		return // one value for several jobs would say nothing of any
	}
	m.lastSuccessTimestamp.WithLabelValues(job, jobns.Of(job)).Set(float64(at.UnixNano()) / 1e9)
}

// Statuses and triggers whose run counters SetJobPeriod creates at zero (store's constants;
// repeated here because metrics must not import store).
var (
	executedStatuses = []string{"succeeded", "failed", "timed_out", "abandoned"}
	triggers         = []string{"schedule", "manual", "catch-up", "recovery"}
)

// SetJobPeriod exposes the longest expected gap between the job's slots, which the
// SchedulerJobStuck alert compares with the time since its last success. A period of 0 (a
// disabled job) removes the series, so a disabled job never alerts. Call it once per
// configured job at start.
//
// It also creates the job's run counters at 0: increase() cannot see the first increment of
// a series that appears with value 1, so without this a job's first failure would never
// reach the failure-ratio alert.
func (m *Metrics) SetJobPeriod(job string, period time.Duration) {
	if m == nil {
		return
	}
	job, own := m.jobs.label(job)
	for _, status := range executedStatuses {
		for _, trigger := range triggers {
			m.runsTotal.WithLabelValues(job, jobns.Of(job), status, trigger)
		}
	}
	if !own {
		return // jobs past the label bound get no stuck alert: see joblabels.go
	}
	if period <= 0 {
		m.expectedPeriod.DeleteLabelValues(job, jobns.Of(job))
		return
	}
	m.expectedPeriod.WithLabelValues(job, jobns.Of(job)).Set(period.Seconds())
}

// SetJobPaused records the job's pause state as the leader sees it; the SchedulerJobStuck
// alert is silenced for paused jobs.
func (m *Metrics) SetJobPaused(job string, paused bool) {
	if m == nil {
		return
	}
	if job, own := m.jobs.label(job); own {
		m.jobPaused.WithLabelValues(job, jobns.Of(job)).Set(boolValue(paused))
	}
}

// JobsLeft removes the pause gauges of jobs whose term ended on this replica (a partition
// that moved to another): the SchedulerJobStuck alert takes the largest value over the
// replicas, so a pause this replica saw last would silence the alert for good after the job
// was resumed under the next holder. The coordinator's step-down clears them all
// (SteppedDown).
func (m *Metrics) JobsLeft(jobs []string) {
	if m == nil {
		return
	}
	for _, job := range jobs {
		m.jobPaused.DeleteLabelValues(job, jobns.Of(job))
	}
}

// SlotsUnrecorded counts due slots of the job that have no row (the slot audit's finding).
func (m *Metrics) SlotsUnrecorded(job string, n int) {
	if m == nil {
		return
	}
	m.slotsUnrecorded.WithLabelValues(m.jobs.jobLabel(job), jobns.Of(job)).Add(float64(n))
}
