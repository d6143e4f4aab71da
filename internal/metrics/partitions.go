package metrics

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
)

// The partitions' elections on this replica (docs/design.md, "Partitions"). The partition
// label is bounded by SCHEDULER_PARTITIONS (at most 1024). The gauges read from
// scheduler_partitions by every replica (holders, hand-overs of the whole cluster) are
// another file's; these count what this replica did.
type partitionCollectors struct {
	elections *prometheus.CounterVec
	handovers *prometheus.CounterVec
	lost      *prometheus.CounterVec
	held      prometheus.Gauge
}

func newPartitionCollectors() partitionCollectors {
	return partitionCollectors{
		elections: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Name: "partition_elections_total",
			Help: "Times this replica was elected for a partition (1..SCHEDULER_PARTITIONS-1), by partition.",
		}, []string{"partition"}),
		handovers: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Name: "partition_takeovers_total",
			Help: "Elections of this replica that took a partition from another replica, by partition. " +
				"A partition rising on several replicas changes hands too often.",
		}, []string{"partition"}),
		lost: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Name: "partition_terms_ended_total",
			Help: "Partition terms of this replica that ended, by reason (released, shutdown, lock_lost, fenced).",
		}, []string{"reason"}),
		held: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: namespace, Name: "partitions_held",
			Help: "Partitions 1..N-1 this replica holds now (the coordinator's partition 0 not included).",
		}),
	}
}

func (c partitionCollectors) all() []prometheus.Collector {
	return []prometheus.Collector{c.elections, c.handovers, c.lost, c.held}
}

// PartitionElected counts an election of this replica for partition p; handover says it
// took p from another replica.
func (m *Metrics) PartitionElected(p int, handover bool) {
	if m == nil {
		return
	}
	label := strconv.Itoa(p)
	m.partitions.elections.WithLabelValues(label).Inc()
	if handover {
		m.partitions.handovers.WithLabelValues(label).Inc()
	}
}

// PartitionLost counts a partition term of this replica that ended, by reason.
func (m *Metrics) PartitionLost(reason string) {
	if m == nil {
		return
	}
	m.partitions.lost.WithLabelValues(reason).Inc()
}

// SetPartitionsHeld sets how many partitions this replica holds.
func (m *Metrics) SetPartitionsHeld(n int) {
	if m == nil {
		return
	}
	m.partitions.held.Set(float64(n))
}
