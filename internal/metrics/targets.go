package metrics

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// The runtime HTTP jobs' calls.

// TargetHostsMax bounds the host label of scheduler_target_calls_total: the first
// TargetHostsMax hosts a replica calls keep a series of their own, and the calls to every
// later host count under host="other". The hosts come from users' URLs, so without a bound
// every changed URL would add series that Prometheus keeps for ever.
const TargetHostsMax = 100

// otherHost is the host label of the hosts past TargetHostsMax.
const otherHost = "other"

// hostLabels hands out the host labels: a host's own name while fewer than TargetHostsMax
// have one, otherHost after.
type hostLabels struct {
	mu   sync.Mutex
	seen map[string]bool
}

func (h *hostLabels) label(host string) string {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.seen[host] {
		return host
	}
	if len(h.seen) >= TargetHostsMax || host == otherHost {
		return otherHost
	}
	if h.seen == nil {
		h.seen = map[string]bool{}
	}
	h.seen[host] = true
	return host
}

// TargetCall counts one attempt of a runtime HTTP job's call: its target host (bounded by
// TargetHostsMax), its status class ("2xx" ... "5xx", or "error" when no answer came) and
// its duration.
func (m *Metrics) TargetCall(host, class string, d time.Duration) {
	if m == nil {
		return
	}
	m.targetCallsTotal.WithLabelValues(m.targetHosts.label(host), class).Inc()
	m.targetCallDuration.WithLabelValues(class).Observe(d.Seconds())
}

// ExportCallsWaiting exposes scheduler_target_calls_waiting: how many calls wait for a
// concurrency slot (SCHEDULER_HTTP_CONCURRENCY, SCHEDULER_HTTP_HOST_CONCURRENCY,
// SCHEDULER_HTTP_JOB_CONCURRENCY) now.
func (m *Metrics) ExportCallsWaiting(waiting func() int64) {
	if m == nil {
		return
	}
	m.registry.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Namespace: namespace, Name: "target_calls_waiting",
		Help: "Runtime HTTP jobs' calls waiting for a concurrency slot.",
	}, func() float64 { return float64(waiting()) }))
}
