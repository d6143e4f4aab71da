package metrics_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schedulerhq/scheduler/internal/metrics"
	"github.com/schedulerhq/scheduler/internal/testmetrics"
)

func value(t *testing.T, families map[string]*dto.MetricFamily, name string, labels map[string]string) float64 {
	t.Helper()
	m := testmetrics.Series(families, name, labels)
	require.NotNil(t, m, "no series %s%v", name, labels)
	switch {
	case m.Counter != nil:
		return m.Counter.GetValue()
	case m.Gauge != nil:
		return m.Gauge.GetValue()
	}
	t.Fatalf("%s is neither a counter nor a gauge", name)
	return 0
}

func histogram(t *testing.T, families map[string]*dto.MetricFamily, name string, labels map[string]string) *dto.Histogram {
	t.Helper()
	m := testmetrics.Series(families, name, labels)
	require.NotNil(t, m, "no series %s%v", name, labels)
	require.NotNil(t, m.Histogram, "%s is not a histogram", name)
	return m.Histogram
}

// cumulativeCount is the histogram's count of observations <= le.
func cumulativeCount(h *dto.Histogram, le float64) uint64 {
	for _, b := range h.GetBucket() {
		if b.GetUpperBound() == le {
			return b.GetCumulativeCount()
		}
	}
	return 0
}

func TestRunLifecycleMovesCountersHistogramsAndGauges(t *testing.T) {
	t.Parallel()
	m := metrics.New()
	job := map[string]string{"job_name": "plan-change"}

	m.RunStarted("plan-change", "schedule", 1500*time.Millisecond)
	families := testmetrics.Scrape(t, m)
	assert.Equal(t, 1.0, value(t, families, "scheduler_jobs_running", job), "a started run is running")

	before := time.Now()
	m.RunFinished("plan-change", "succeeded", "schedule", 2*time.Second)
	after := time.Now()
	// A manual run has no slot: it runs and counts, but must not feed the schedule delay.
	m.RunStarted("plan-change", "manual", time.Hour)
	m.RunFinished("plan-change", "failed", "manual", 30*time.Second)
	m.RunRecorded("plan-change", "skipped", "schedule")

	families = testmetrics.Scrape(t, m)
	assert.Equal(t, 0.0, value(t, families, "scheduler_jobs_running", job), "every finished run left the gauge")
	assert.Equal(t, 1.0, value(t, families, "scheduler_runs_total",
		map[string]string{"job_name": "plan-change", "status": "succeeded", "trigger": "schedule"}))
	assert.Equal(t, 1.0, value(t, families, "scheduler_runs_total",
		map[string]string{"job_name": "plan-change", "status": "failed", "trigger": "manual"}))
	assert.Equal(t, 1.0, value(t, families, "scheduler_runs_total",
		map[string]string{"job_name": "plan-change", "status": "skipped", "trigger": "schedule"}))

	duration := histogram(t, families, "scheduler_run_duration_seconds", job)
	assert.Equal(t, uint64(2), duration.GetSampleCount(), "the skipped run never executed")
	assert.InDelta(t, 32.0, duration.GetSampleSum(), 1e-9)
	assert.Equal(t, uint64(1), cumulativeCount(duration, 5), "2 s falls in le=5, 30 s does not")

	delay := histogram(t, families, "scheduler_schedule_delay_seconds", job)
	assert.Equal(t, uint64(1), delay.GetSampleCount(), "only the scheduled run has a schedule delay")
	assert.InDelta(t, 1.5, delay.GetSampleSum(), 1e-9)
	assert.Equal(t, uint64(0), cumulativeCount(delay, 1))
	assert.Equal(t, uint64(1), cumulativeCount(delay, 2.5))

	last := value(t, families, "scheduler_job_last_success_timestamp_seconds", job)
	assert.GreaterOrEqual(t, last, float64(before.UnixNano())/1e9)
	assert.LessOrEqual(t, last, float64(after.UnixNano())/1e9, "the failed run must not move the last success")
}

func TestJobStateGauges(t *testing.T) {
	t.Parallel()
	m := metrics.New()
	succeeded := time.Date(2026, 3, 1, 2, 0, 5, 0, time.UTC)
	m.SetLastSuccess("status-sync", succeeded)
	m.SetLastSuccess("rounds-open", time.Time{}) // never succeeded: no series, not 1970
	m.SetJobPeriod("status-sync", 24*time.Hour)
	m.SetJobPeriod("rounds-open", 5*time.Minute)
	m.SetJobPeriod("rounds-open", 0) // disabled afterwards
	m.SetJobPaused("status-sync", true)

	families := testmetrics.Scrape(t, m)
	assert.Equal(t, float64(succeeded.Unix()), value(t, families, "scheduler_job_last_success_timestamp_seconds",
		map[string]string{"job_name": "status-sync"}))
	assert.Nil(t, testmetrics.Series(families, "scheduler_job_last_success_timestamp_seconds", map[string]string{"job_name": "rounds-open"}))
	assert.Equal(t, 86400.0, value(t, families, "scheduler_job_expected_period_seconds", map[string]string{"job_name": "status-sync"}))
	assert.Nil(t, testmetrics.Series(families, "scheduler_job_expected_period_seconds", map[string]string{"job_name": "rounds-open"}),
		"a disabled job has no expected period, so it cannot alert as stuck")
	assert.Equal(t, 1.0, value(t, families, "scheduler_job_paused", map[string]string{"job_name": "status-sync"}))
	for _, status := range []string{"succeeded", "failed", "timed_out", "abandoned"} {
		assert.Equal(t, 0.0, value(t, families, "scheduler_runs_total",
			map[string]string{"job_name": "status-sync", "status": status, "trigger": "schedule"}),
			"the first failure must be an increase from an existing 0, or increase() misses it")
	}
}

func TestLeadershipMetrics(t *testing.T) {
	t.Parallel()
	m := metrics.New()
	m.SetInstanceID("scheduler-2")
	m.SetLeader(false, 6)
	families := testmetrics.Scrape(t, m)
	assert.Equal(t, 0.0, value(t, families, "scheduler_is_leader", nil))
	assert.Equal(t, 6.0, value(t, families, "scheduler_leader_epoch", nil), "a follower reports the epoch it saw")
	assert.Equal(t, 1.0, value(t, families, "scheduler_instance_info", map[string]string{"instance_id": "scheduler-2"}))

	m.SetLeader(true, 7)
	m.Elected(0.2)
	m.SetJobPaused("rounds-close", true)
	families = testmetrics.Scrape(t, m)
	assert.Equal(t, 1.0, value(t, families, "scheduler_is_leader", nil))
	assert.Equal(t, 7.0, value(t, families, "scheduler_leader_epoch", nil))
	assert.Equal(t, 1.0, value(t, families, "scheduler_elections_total", nil))
	handover := histogram(t, families, "scheduler_handover_duration_seconds", nil)
	assert.Equal(t, uint64(1), handover.GetSampleCount())
	assert.InDelta(t, 0.2, handover.GetSampleSum(), 1e-9)

	m.SteppedDown("shutdown")
	m.Elected(-1) // a cold start: counted, no duration
	families = testmetrics.Scrape(t, m)
	assert.Equal(t, 0.0, value(t, families, "scheduler_is_leader", nil), "stepping down clears is_leader")
	assert.Equal(t, 1.0, value(t, families, "scheduler_step_downs_total", map[string]string{"reason": "shutdown"}))
	assert.Nil(t, testmetrics.Series(families, "scheduler_job_paused", map[string]string{"job_name": "rounds-close"}),
		"a former leader must not keep reporting pause state")
	assert.Equal(t, 2.0, value(t, families, "scheduler_elections_total", nil))
	assert.Equal(t, uint64(1), histogram(t, families, "scheduler_handover_duration_seconds", nil).GetSampleCount())
}

func TestEntityLockAndIdempotencyCounters(t *testing.T) {
	t.Parallel()
	m := metrics.New()
	m.Entities("status-sync", 10, 4, 3, 1)
	m.Entities("status-sync", 5, 5, 0, 0)
	m.LockAcquired("leader", 40*time.Millisecond)
	m.IdempotencyReplay()
	m.IdempotencyReplay()
	m.IdempotencyConflict()

	families := testmetrics.Scrape(t, m)
	for outcome, want := range map[string]float64{"processed": 15, "changed": 9, "skipped_locked": 3, "error": 1} {
		assert.Equal(t, want, value(t, families, "scheduler_entities_total",
			map[string]string{"job_name": "status-sync", "outcome": outcome}), outcome)
	}
	assert.Nil(t, families["scheduler_entity_lock_contention_total"],
		"per-entity lock contention is entities_total{outcome=skipped_locked}, not a second counter")
	wait := histogram(t, families, "scheduler_lock_wait_seconds", map[string]string{"lock": "leader"})
	assert.Equal(t, uint64(1), wait.GetSampleCount())
	assert.Equal(t, uint64(0), cumulativeCount(wait, 0.025))
	assert.Equal(t, uint64(1), cumulativeCount(wait, 0.05))
	assert.Equal(t, 2.0, value(t, families, "scheduler_idempotency_replays_total", nil))
	assert.Equal(t, 1.0, value(t, families, "scheduler_idempotency_conflicts_total", nil))
}

func TestNilMetricsIsANoOp(t *testing.T) {
	t.Parallel()
	var m *metrics.Metrics
	m.SetInstanceID("x")
	m.SetLeader(true, 1)
	m.Elected(0.1)
	m.SteppedDown("shutdown")
	m.RunStarted("j", "schedule", time.Second)
	m.RunFinished("j", "succeeded", "schedule", time.Second)
	m.RunRecorded("j", "missed", "schedule")
	m.SetLastSuccess("j", time.Now())
	m.SetJobPeriod("j", time.Hour)
	m.SetJobPaused("j", true)
	m.Entities("j", 1, 1, 0, 0)
	m.LockAcquired("leader", time.Millisecond)
	m.IdempotencyReplay()
	m.IdempotencyConflict()
	m.HTTPRequest("/v1/runs/{id}", http.MethodGet, http.StatusOK, time.Millisecond)

	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	assert.Equal(t, http.StatusNotFound, rec.Code)
}

func TestRegistriesAreIndependent(t *testing.T) {
	t.Parallel()
	// Several schedulers in one test process each get their own numbers (no global registry).
	a, b := metrics.New(), metrics.New()
	a.IdempotencyReplay()
	assert.Equal(t, 1.0, value(t, testmetrics.Scrape(t, a), "scheduler_idempotency_replays_total", nil))
	assert.Equal(t, 0.0, value(t, testmetrics.Scrape(t, b), "scheduler_idempotency_replays_total", nil))
	assert.NotNil(t, testmetrics.Scrape(t, a)["go_goroutines"], "the Go runtime collector is registered")
	assert.NotNil(t, testmetrics.Scrape(t, a)["process_cpu_seconds_total"], "the process collector is registered")
}

// scheduler_target_calls_total{host} takes its label from users' URLs: every changed URL
// would be a new series for ever. The first TargetHostsMax hosts keep their own series,
// every later one counts under "other" (issue 28, 6).
func TestTargetHostLabelsAreBounded(t *testing.T) {
	t.Parallel()
	m := metrics.New()
	for i := range metrics.TargetHostsMax + 50 {
		m.TargetCall(fmt.Sprintf("h%d.example", i), "2xx", time.Millisecond)
	}
	m.TargetCall("h0.example", "5xx", time.Millisecond) // a known host keeps its own series

	families := testmetrics.Scrape(t, m)
	hosts := map[string]bool{}
	for _, s := range families["scheduler_target_calls_total"].GetMetric() {
		for _, l := range s.GetLabel() {
			if l.GetName() == "host" {
				hosts[l.GetValue()] = true
			}
		}
	}
	assert.Len(t, hosts, metrics.TargetHostsMax+1, "the first hosts and other")
	assert.Equal(t, 50.0, value(t, families, "scheduler_target_calls_total", map[string]string{"host": "other", "class": "2xx"}))
	assert.Equal(t, 1.0, value(t, families, "scheduler_target_calls_total", map[string]string{"host": "h0.example", "class": "5xx"}))
}

// TestEveryJobSeriesCarriesItsNamespace: each series labelled by job also carries the job's
// namespace, so an alert on any of them can be routed to the team that owns the job. The
// namespace follows from the job's name, so it adds no series.
func TestEveryJobSeriesCarriesItsNamespace(t *testing.T) {
	t.Parallel()
	m := metrics.New()
	for _, job := range []string{"billing/report", "status-sync"} {
		m.SetJobPeriod(job, time.Hour)
		m.SetJobPaused(job, false)
		m.SetLastSuccess(job, time.Now())
		m.SlotsUnrecorded(job, 1)
		m.RunStarted(job, "schedule", time.Second)
		m.RunFinished(job, "succeeded", "schedule", time.Second)
		m.Entities(job, 1, 1, 0, 0)
	}
	families := testmetrics.Scrape(t, m)
	checked := 0
	for name, f := range families {
		for _, s := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range s.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			job, ok := labels["job_name"]
			if !ok {
				continue
			}
			checked++
			want := map[string]string{"billing/report": "billing", "status-sync": "default"}[job]
			assert.Equal(t, want, labels["namespace"], "%s%v", name, labels)
		}
	}
	assert.Greater(t, checked, 20)
}
