// Package metrics is the scheduler's Prometheus instrumentation: one registry per process
// (not the global default, so tests and several schedulers in one process never collide),
// and small methods named after what happened — a run started, a replica was elected — so
// callers never touch label names or metric types.
//
// A nil *Metrics is valid and records nothing: tests and optional wiring need no guards.
//
// Label names: the job's name is the label "job_name", not "job", because Prometheus puts
// every scraped series' target job into "job" (it would rename ours to "exported_job").
// A runtime job outside namespace default is named "<namespace>/<name>", and every series
// labelled by job also carries its namespace, so Alertmanager can route a team's alerts to
// that team; the namespace follows from the job's name, so it adds no series. Job labels are
// bounded per namespace and in all (joblabels.go).
// Every label value comes from a closed set (job names, statuses, triggers, route patterns,
// reasons), never from ids or raw paths, so the number of series stays bounded.
package metrics

import (
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	jobns "github.com/schedulerhq/scheduler/internal/namespace"
)

const namespace = "scheduler"

// Histogram buckets, in seconds, chosen for what each one measures.
var (
	// A scheduled run normally starts within milliseconds of its slot; the alert fires when
	// the p99 passes 5 minutes, so there must be bucket edges on both sides of 300 s.
	scheduleDelayBuckets = []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800, 3600}
	// Job bodies run from well under a second (nothing due) to the longest timeouts (hours).
	runDurationBuckets = []float64{0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800, 3600, 7200}
	// Hand-over is promised "well under a second" after a clean step-down and within the
	// lease timeout (5 s default) after a crash or partition.
	handoverBuckets = []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 7.5, 10, 15, 30, 60}
	// Advisory-lock waits: immediate when free, up to the lease timeout when fenced
	// transactions of a deposed leader hold the leader row.
	lockWaitBuckets = []float64{0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60}
	// HTTP: most answers take milliseconds; POST /v1/jobs/{name}/runs?wait= can hold a
	// request for up to its wait (30 s and more).
	httpDurationBuckets = []float64{0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120}
)

// Metrics holds the scheduler's collectors and the registry they are exposed from.
type Metrics struct {
	registry *prometheus.Registry
	// targetHosts are the host labels scheduler_target_calls_total has given out.
	targetHosts hostLabels
	// jobs are the job_name labels given out (joblabels.go).
	jobs jobLabels

	instanceInfo *prometheus.GaugeVec

	isLeader        prometheus.Gauge
	clockSkew       prometheus.Gauge
	leaderEpoch     prometheus.Gauge
	electionsTotal  prometheus.Counter
	failoversTotal  prometheus.Counter
	handoverSeconds prometheus.Histogram
	stepDownsTotal  *prometheus.CounterVec

	runsTotal            *prometheus.CounterVec
	replicaRunsTotal     prometheus.Counter // partitions_seen.go
	runDurationSeconds   *prometheus.HistogramVec
	scheduleDelaySeconds *prometheus.HistogramVec
	jobsRunning          *prometheus.GaugeVec
	lastSuccessTimestamp *prometheus.GaugeVec
	expectedPeriod       *prometheus.GaugeVec
	jobPaused            *prometheus.GaugeVec
	slotsUnrecorded      *prometheus.CounterVec

	entitiesTotal   *prometheus.CounterVec
	lockWaitSeconds *prometheus.HistogramVec

	idempotencyReplaysTotal   prometheus.Counter
	idempotencyConflictsTotal prometheus.Counter

	httpRequestsTotal   *prometheus.CounterVec
	httpRequestDuration *prometheus.HistogramVec

	// Runtime HTTP jobs' outbound calls, by target host (bounded by the jobs defined) and
	// status class.
	targetCallsTotal   *prometheus.CounterVec
	targetCallDuration *prometheus.HistogramVec

	controlIgnoredTotal *prometheus.CounterVec // control.go
	notifications       notificationCounters   // notify.go
	bodies              bodyGauges             // bodies.go
	partitions          partitionCollectors    // partitions.go
}

// New builds the collectors and registers them, with the Go runtime and process collectors,
// on a registry of their own.
func New() *Metrics {
	m := &Metrics{
		registry: prometheus.NewRegistry(),

		instanceInfo: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: namespace, Name: "instance_info",
			Help: "Always 1; its instance_id label maps a scrape target to the replica's SCHEDULER_INSTANCE_ID.",
		}, []string{"instance_id"}),

		isLeader: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: namespace, Name: "is_leader",
			Help: "1 while this replica holds leadership, else 0. Summed over replicas it must be exactly 1.",
		}),
		clockSkew: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: namespace, Name: "clock_skew_seconds",
			Help: "The database clock minus this replica's clock, measured at each instance heartbeat (half the " +
				"round trip taken as the send time). Slots are computed on the replica's clock; the leader waits out a " +
				"slot that is still in the future by the database's.",
		}),
		leaderEpoch: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: namespace, Name: "leader_epoch",
			Help: "The leadership epoch (fencing token) this replica last saw; it grows by one per election.",
		}),
		electionsTotal: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: namespace, Name: "elections_total",
			Help: "Times this replica became leader.",
		}),
		failoversTotal: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: namespace, Name: "failovers_total",
			Help: "Terms of this replica that found PostgreSQL failed over since the previous term " +
				"(timeline changed, or the leader row went back) and repaired SCHEDULER_FAILOVER_WINDOW.",
		}),
		handoverSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: namespace, Name: "handover_duration_seconds",
			Help: "Seconds from the previous leader stopping to this replica leading with a new epoch. " +
				"After a resignation or step-down it runs from the lock's release; after a crash or hang, from the old " +
				"leader's last instance heartbeat, so it may read up to one heartbeat interval (2s) high.",
			Buckets: handoverBuckets,
		}),
		stepDownsTotal: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Name: "step_downs_total",
			Help: "Times this replica stopped leading, by reason (shutdown, step_down, lock_lost, fenced).",
		}, []string{"reason"}),

		runsTotal: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Name: "runs_total",
			Help: "Runs that reached a final status on this replica, by job, its namespace, status and trigger.",
		}, []string{"job_name", "namespace", "status", "trigger"}),
		runDurationSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: namespace, Name: "run_duration_seconds",
			Help:    "Wall time of runs that executed, from start to final status, by job.",
			Buckets: runDurationBuckets,
		}, []string{"job_name", "namespace"}),
		scheduleDelaySeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: namespace, Name: "schedule_delay_seconds",
			Help:    "Seconds between a scheduled slot's nominal time and the start of its run, by job.",
			Buckets: scheduleDelayBuckets,
		}, []string{"job_name", "namespace"}),
		jobsRunning: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: namespace, Name: "jobs_running",
			Help: "Runs executing on this replica now, by job.",
		}, []string{"job_name", "namespace"}),
		lastSuccessTimestamp: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: namespace, Name: "job_last_success_timestamp_seconds",
			Help: "Unix time of the job's last successful run known to this replica (take max over replicas).",
		}, []string{"job_name", "namespace"}),
		expectedPeriod: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: namespace, Name: "job_expected_period_seconds",
			Help: "Longest expected gap between two slots of the job's schedule; absent for disabled jobs.",
		}, []string{"job_name", "namespace"}),
		jobPaused: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: namespace, Name: "job_paused",
			Help: "1 while the job is paused (POST /v1/jobs/{name}/pause), as seen by the leader.",
		}, []string{"job_name", "namespace"}),
		slotsUnrecorded: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Name: "slots_unrecorded_total",
			Help: "Due slots the leader found without a row a minute after their time (guarantee 10 says none); by job.",
		}, []string{"job_name", "namespace"}),

		entitiesTotal: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Name: "entities_total",
			Help: "Entities handled by runs, by job and outcome: processed (all examined); changed, skipped_locked and error are subsets of processed.",
		}, []string{"job_name", "namespace", "outcome"}),
		lockWaitSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: namespace, Name: "lock_wait_seconds",
			Help:    "Seconds spent waiting to acquire a named lock, by lock.",
			Buckets: lockWaitBuckets,
		}, []string{"lock"}),

		idempotencyReplaysTotal: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: namespace, Name: "idempotency_replays_total",
			Help: "Requests answered by replaying the stored answer of the same Idempotency-Key and body.",
		}),
		idempotencyConflictsTotal: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: namespace, Name: "idempotency_conflicts_total",
			Help: "Requests refused with 409 because their Idempotency-Key was used with another body.",
		}),

		httpRequestsTotal: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Name: "http_requests_total",
			Help: "HTTP requests answered, by route pattern, method and status code.",
		}, []string{"route", "method", "code"}),
		targetCallsTotal: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Name: "target_calls_total",
			Help: "Attempts of runtime HTTP jobs' calls, by target host (the first 100 hosts; later ones: other) and status class (error: no answer).",
		}, []string{"host", "class"}),
		targetCallDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: namespace, Name: "target_call_duration_seconds",
			Help:    "Duration of runtime HTTP jobs' call attempts, by status class.",
			Buckets: httpDurationBuckets,
		}, []string{"class"}),
		controlIgnoredTotal: newControlIgnoredTotal(),
		replicaRunsTotal:    newReplicaRunsTotal(),
		notifications:       newNotificationCounters(),
		partitions:          newPartitionCollectors(),
		httpRequestDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: namespace, Name: "http_request_duration_seconds",
			Help:    "Seconds from receiving a request to the handler's return, by route pattern and method.",
			Buckets: httpDurationBuckets,
		}, []string{"route", "method"}),
	}
	m.registry.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		m.instanceInfo,
		m.isLeader, m.clockSkew, m.leaderEpoch, m.electionsTotal, m.failoversTotal, m.handoverSeconds, m.stepDownsTotal,
		m.runsTotal, m.replicaRunsTotal, m.runDurationSeconds, m.scheduleDelaySeconds, m.jobsRunning,
		m.lastSuccessTimestamp, m.expectedPeriod, m.jobPaused, m.slotsUnrecorded,
		m.entitiesTotal, m.lockWaitSeconds,
		m.idempotencyReplaysTotal, m.idempotencyConflictsTotal,
		m.httpRequestsTotal, m.httpRequestDuration,
		m.targetCallsTotal, m.targetCallDuration,
		m.controlIgnoredTotal, m.notifications.sent, m.notifications.failed,
	)
	m.bodies = newBodyGauges(m.registry)
	m.registry.MustRegister(m.partitions.all()...)
	return m
}

// Handler serves the registry in the Prometheus exposition format (GET /metrics).
// A nil *Metrics serves 404, as if the route did not exist.
func (m *Metrics) Handler() http.Handler {
	if m == nil {
		return http.NotFoundHandler()
	}
	return promhttp.HandlerFor(m.registry, promhttp.HandlerOpts{Registry: m.registry})
}

// SetInstanceID exposes scheduler_instance_info{instance_id=id} 1, so a dashboard can name
// the replica behind each scrape target.
func (m *Metrics) SetInstanceID(id string) {
	if m == nil {
		return
	}
	m.instanceInfo.Reset()
	m.instanceInfo.WithLabelValues(id).Set(1)
}

// SetLeader records whether this replica leads and the epoch it knows (its own when leading,
// the current leader's when following).
func (m *Metrics) SetLeader(isLeader bool, epoch int64) {
	if m == nil {
		return
	}
	m.isLeader.Set(boolValue(isLeader))
	m.leaderEpoch.Set(float64(epoch))
}

// SetClockSkew records the database clock minus this replica's clock.
func (m *Metrics) SetClockSkew(skew time.Duration) {
	if m == nil {
		return
	}
	m.clockSkew.Set(skew.Seconds())
}

// FailedOver counts a term that found the database failed over since the previous one.
func (m *Metrics) FailedOver() {
	if m == nil {
		return
	}
	m.failoversTotal.Inc()
}

// Elected counts an election won by this replica and observes how long the hand-over took.
// A negative handoverSeconds (unknown, e.g. the first leader of a cold cluster) counts the
// election without observing a duration.
func (m *Metrics) Elected(handoverSeconds float64) {
	if m == nil {
		return
	}
	m.electionsTotal.Inc()
	if handoverSeconds >= 0 {
		m.handoverSeconds.Observe(handoverSeconds)
	}
}

// SteppedDown records that this replica stopped leading and why. It also sets is_leader to 0
// and clears the leader-owned job_paused gauges, so a former leader cannot keep reporting a
// pause state that the new leader alone keeps current.
func (m *Metrics) SteppedDown(reason string) {
	if m == nil {
		return
	}
	m.stepDownsTotal.WithLabelValues(reason).Inc()
	m.isLeader.Set(0)
	m.jobPaused.Reset()
}

// RunStarted records that a run began executing. For scheduled runs it observes the schedule
// delay (actual start minus the slot's nominal time); manual, catch-up and recovery runs are
// late on purpose and would drown the signal, so only the running gauge moves for them.
// Every RunStarted must be followed by exactly one RunFinished for the same job.
func (m *Metrics) RunStarted(job, trigger string, scheduleDelay time.Duration) {
	if m == nil {
		return
	}
	job = m.jobs.jobLabel(job)
	m.jobsRunning.WithLabelValues(job, jobns.Of(job)).Inc()
	if trigger == "schedule" {
		m.scheduleDelaySeconds.WithLabelValues(job, jobns.Of(job)).Observe(max(scheduleDelay.Seconds(), 0))
	}
}

// RunFinished records the final status of a run that RunStarted announced: it counts the run,
// observes its duration, lowers the running gauge and, on success, sets the job's last
// success time to now.
func (m *Metrics) RunFinished(job, status, trigger string, duration time.Duration) {
	if m == nil {
		return
	}
	job, own := m.jobs.label(job)
	m.jobsRunning.WithLabelValues(job, jobns.Of(job)).Dec()
	m.runsTotal.WithLabelValues(job, jobns.Of(job), status, trigger).Inc()
	m.replicaRunsTotal.Inc()
	m.runDurationSeconds.WithLabelValues(job, jobns.Of(job)).Observe(duration.Seconds())
	if status == "succeeded" && own {
		m.lastSuccessTimestamp.WithLabelValues(job, jobns.Of(job)).Set(float64(time.Now().UnixNano()) / 1e9)
	}
}

// RunRecorded counts a run that reached a final status without executing here: a slot
// skipped for overlap or recorded as missed, a dead leader's run marked abandoned, a queued
// run cancelled before it started.
func (m *Metrics) RunRecorded(job, status, trigger string) {
	if m == nil {
		return
	}
	job = m.jobs.jobLabel(job)
	m.runsTotal.WithLabelValues(job, jobns.Of(job), status, trigger).Inc()
}

// Entities adds a run's entity counts (job.Stats) to scheduler_entities_total.
func (m *Metrics) Entities(job string, processed, changed, skippedLocked, errors int64) {
	if m == nil {
		return
	}
	for _, c := range []struct {
		outcome string
		n       int64
	}{{"processed", processed}, {"changed", changed}, {"skipped_locked", skippedLocked}, {"error", errors}} {
		// Creating the series even for 0 lets rate() and ratios see the job from its first run.
		m.entitiesTotal.WithLabelValues(m.jobs.jobLabel(job), jobns.Of(job), c.outcome).Add(float64(max(c.n, 0)))
	}
}

// LockAcquired observes how long acquiring the named lock took. lock names a kind of lock
// ("leader", "leader_row"), never an entity, to keep the series bounded.
func (m *Metrics) LockAcquired(lock string, wait time.Duration) {
	if m == nil {
		return
	}
	m.lockWaitSeconds.WithLabelValues(lock).Observe(max(wait.Seconds(), 0))
}

// IdempotencyReplay counts a request answered from a stored Idempotency-Key answer.
func (m *Metrics) IdempotencyReplay() {
	if m == nil {
		return
	}
	m.idempotencyReplaysTotal.Inc()
}

// IdempotencyConflict counts a request refused because its key was used with another body.
func (m *Metrics) IdempotencyConflict() {
	if m == nil {
		return
	}
	m.idempotencyConflictsTotal.Inc()
}

// unmatchedRoute labels requests no route matched, so scanners probing random paths add one
// series, not one per path.
const unmatchedRoute = "unmatched"

// HTTPRequest records one answered request by chi route pattern (/v1/runs/{id}, not
// /v1/runs/42), method and status code; route "" (no route matched) is labelled
// "unmatched". The API's observing middleware calls it once per request.
func (m *Metrics) HTTPRequest(route, method string, code int, d time.Duration) {
	if m == nil {
		return
	}
	if route == "" {
		route = unmatchedRoute
	}
	m.httpRequestsTotal.WithLabelValues(route, method, strconv.Itoa(code)).Inc()
	m.httpRequestDuration.WithLabelValues(route, method).Observe(d.Seconds())
}

func boolValue(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
