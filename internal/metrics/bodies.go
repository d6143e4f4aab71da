package metrics

import "github.com/prometheus/client_golang/prometheus"

// bodyGauges are the replica's run bodies (internal/engine's gate): how many run, how many
// wait for a place, and the bound they share (SCHEDULER_RUN_CONCURRENCY).
type bodyGauges struct {
	running, waiting, limit prometheus.Gauge
}

// newBodyGauges builds the run bodies' gauges and registers them on reg.
func newBodyGauges(reg *prometheus.Registry) bodyGauges {
	g := bodyGauges{
		running: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: namespace, Name: "run_bodies_running",
			Help: "Run bodies this replica runs now, every partition it leads together; at most scheduler_run_bodies_limit.",
		}),
		waiting: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: namespace, Name: "run_bodies_waiting",
			Help: "Claimed runs waiting on this replica for a place to run their body (SCHEDULER_RUN_CONCURRENCY, " +
				"or their namespace's share of it). Above 0 for long: the bound is too low for the jobs due at once, " +
				"or one namespace's slow targets hold its share.",
		}),
		limit: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: namespace, Name: "run_bodies_limit",
			Help: "The run bodies this replica runs at most at once (SCHEDULER_RUN_CONCURRENCY).",
		}),
	}
	reg.MustRegister(g.running, g.waiting, g.limit)
	return g
}

// RunBodies records the replica's run bodies: running and waiting now, of limit.
func (m *Metrics) RunBodies(running, waiting, limit int) {
	if m == nil {
		return
	}
	m.bodies.running.Set(float64(running))
	m.bodies.waiting.Set(float64(waiting))
	m.bodies.limit.Set(float64(limit))
}
