package metrics_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/schedulerhq/scheduler/internal/metrics"
	"github.com/schedulerhq/scheduler/internal/testmetrics"
)

// jobNames returns the job_name values of name's series.
func jobNames(t *testing.T, m *metrics.Metrics, name string) map[string]float64 {
	t.Helper()
	out := map[string]float64{}
	f := testmetrics.Scrape(t, m)[name]
	if f == nil {
		return out
	}
	for _, s := range f.GetMetric() {
		for _, l := range s.GetLabel() {
			if l.GetName() == "job_name" {
				out[l.GetValue()] += s.GetCounter().GetValue() + s.GetGauge().GetValue()
			}
		}
	}
	return out
}

// TestJobLabelsStayBounded: a team that defines more jobs than the bound gets a series of
// its own for the first JobLabelsPerNamespace, and the rest count under its overflow label;
// every namespace together gets at most JobLabelsMax own labels, plus one overflow label
// per namespace. The built-in jobs, reported first, keep theirs.
func TestJobLabelsStayBounded(t *testing.T) {
	t.Parallel()
	m := metrics.New()
	m.SetJobPeriod("plan-change", time.Hour)
	const extra = 7
	for i := range metrics.JobLabelsPerNamespace + extra {
		job := fmt.Sprintf("ops/job-%d", i)
		m.SetJobPeriod(job, time.Hour)
		m.SetJobPaused(job, false)
		m.RunStarted(job, "schedule", 0)
		m.RunFinished(job, "failed", "schedule", time.Second)
	}
	runs := jobNames(t, m, "scheduler_runs_total")
	var ops int
	for name := range runs {
		if strings.HasPrefix(name, "ops/") {
			ops++
		}
	}
	assert.Equal(t, metrics.JobLabelsPerNamespace+1, ops, "ops's own labels and its overflow label")
	assert.Equal(t, float64(extra), runs["ops/_other"], "the jobs past the bound count under ops/_other")
	assert.Contains(t, runs, "plan-change", "a built-in job keeps its label")
	assert.NotContains(t, jobNames(t, m, "scheduler_job_expected_period_seconds"), "ops/_other",
		"no stuck alert can mix several jobs' periods")
	assert.NotContains(t, jobNames(t, m, "scheduler_job_paused"), "ops/_other")
	assert.Zero(t, jobNames(t, m, "scheduler_jobs_running")["ops/_other"], "the running gauge adds up under the overflow label")

	// Many namespaces: at most JobLabelsMax own labels in all.
	for n := range metrics.JobLabelsMax/metrics.JobLabelsPerNamespace + 2 {
		for i := range metrics.JobLabelsPerNamespace {
			m.RunRecorded(fmt.Sprintf("team-%d/job-%d", n, i), "skipped", "schedule")
		}
	}
	var own, overflow int
	for name := range jobNames(t, m, "scheduler_runs_total") {
		if strings.HasSuffix(name, "/_other") {
			overflow++
		} else {
			own++
		}
	}
	assert.Equal(t, metrics.JobLabelsMax, own)
	assert.LessOrEqual(t, overflow, metrics.JobLabelsMax/metrics.JobLabelsPerNamespace+3)
}
