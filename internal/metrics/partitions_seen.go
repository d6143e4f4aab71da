package metrics

import (
	"context"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// What every replica reads of the partitions from the database, for the alerts on a
// partition nobody holds and on one that changes hands too often. They are read from the
// table, not counted by the replica that won an election (internal/leader counts its own):
// a dead holder reports nothing, and each replica's counters start from zero at its restart,
// while the table has the whole cluster's history. Every replica exports the same values;
// the alerts take their max.

// partitionsReadTimeout bounds the read at each scrape: a database that does not answer
// leaves the gauges out of that scrape rather than holding the scrape (and the process
// metrics beside them) past Prometheus' own timeout.
const partitionsReadTimeout = 2 * time.Second

// PartitionsRead reads, at a scrape, how many partitions nobody holds now (no renewal within
// the lease) and each partition's count of hand-overs (scheduler_partitions.handovers).
type PartitionsRead func(ctx context.Context) (unheld int, handovers map[int]int64, err error)

type partitionsCollector struct {
	read      PartitionsRead
	unheld    *prometheus.Desc
	handovers *prometheus.Desc
}

func (c *partitionsCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.unheld
	ch <- c.handovers
}

func (c *partitionsCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), partitionsReadTimeout)
	defer cancel()
	unheld, handovers, err := c.read(ctx)
	if err != nil {
		return // absent from this scrape; the database's own alerts say why
	}
	ch <- prometheus.MustNewConstMetric(c.unheld, prometheus.GaugeValue, float64(unheld))
	for p, n := range handovers {
		ch <- prometheus.MustNewConstMetric(c.handovers, prometheus.GaugeValue, float64(n), strconv.Itoa(p))
	}
}

// ExportPartitions exposes scheduler_partitions_unheld and scheduler_partition_handovers,
// read by read at each scrape. The partition label is bounded by SCHEDULER_PARTITIONS (at
// most 1024).
func (m *Metrics) ExportPartitions(read PartitionsRead) {
	if m == nil {
		return
	}
	m.registry.MustRegister(&partitionsCollector{read: read,
		unheld: prometheus.NewDesc(prometheus.BuildFQName(namespace, "", "partitions_unheld"),
			"Partitions (the coordinator's included) whose holder has not renewed them within the lease, read from the "+
				"database: their jobs do not run until a replica takes them over.", nil, nil),
		handovers: prometheus.NewDesc(prometheus.BuildFQName(namespace, "", "partition_handovers"),
			"Elections of the partition that changed its holder since the cluster was made, read from the database "+
				"(scheduler_partitions.handovers); it only grows. The coordinator's partition 0 is not counted here.",
			[]string{"partition"}, nil),
	})
}

// replicaRunsTotal counts the runs this replica executed: its share of the cluster's work.
// scheduler_runs_total has the same runs by job, but its job labels are bounded and it also
// counts runs recorded without executing (skipped, missed, abandoned).
func newReplicaRunsTotal() prometheus.Counter {
	return prometheus.NewCounter(prometheus.CounterOpts{
		Namespace: namespace, Name: "replica_runs_total",
		Help: "Runs this replica executed to a final status, all jobs: sum by instance to see each replica's share.",
	})
}
