package metrics

import (
	"sync"

	jobns "github.com/schedulerhq/scheduler/internal/namespace"
)

// Job labels are bounded: teams define jobs at runtime, and every name a replica reports
// becomes series that Prometheus keeps for weeks. The first JobLabelsPerNamespace jobs of
// each namespace that a replica reports, and at most JobLabelsMax in all, keep a job_name of
// their own; every later job of a namespace is reported under that namespace's
// overflowJobName ("_other", or "<namespace>/_other": no job can be named so, job names
// have no underscore). So the series grow with the number of namespaces, which an admin
// makes, and not with what a team's token does. The built-in jobs are reported first, at
// start, so they always keep theirs. A label once given stays until the process restarts.
const (
	JobLabelsPerNamespace = 100
	JobLabelsMax          = 1000
)

// overflowJobName is the job name under which the jobs past the bound are reported.
const overflowJobName = "_other"

// jobLabels hands out the job_name labels within the bounds.
type jobLabels struct {
	mu    sync.Mutex
	seen  map[string]bool
	perNS map[string]int
}

// label returns the job_name label of job, and whether it is the job's own (false: its
// namespace's overflow label, under which per-job gauges must not be set, since they would
// mix several jobs' values into one).
func (l *jobLabels) label(job string) (string, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.seen[job] {
		return job, true
	}
	ns := jobns.Of(job)
	if len(l.seen) >= JobLabelsMax || l.perNS[ns] >= JobLabelsPerNamespace {
		return jobns.Key(ns, overflowJobName), false
	}
	if l.seen == nil {
		l.seen, l.perNS = map[string]bool{}, map[string]int{}
	}
	l.seen[job] = true
	l.perNS[ns]++
	return job, true
}

// jobLabel is label's first result, for the series that add up across jobs (counters,
// histograms, the running gauge).
func (l *jobLabels) jobLabel(job string) string {
	v, _ := l.label(job)
	return v
}
