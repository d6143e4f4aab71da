package metrics_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/schedulerhq/scheduler/internal/metrics"
	"github.com/schedulerhq/scheduler/internal/testmetrics"
)

// The partition gauges are read at each scrape; a read that fails leaves them out of that
// scrape, and the rest of the scrape is served.
func TestPartitionGaugesAreReadAtEachScrape(t *testing.T) {
	t.Parallel()
	m := metrics.New()
	fail := false
	m.ExportPartitions(func(ctx context.Context) (int, map[int]int64, error) {
		if _, ok := ctx.Deadline(); !ok {
			t.Error("the read has no deadline")
		}
		if fail {
			return 0, nil, errors.New("database down")
		}
		return 2, map[int]int64{1: 0, 2: 7}, nil
	})
	families := testmetrics.Scrape(t, m)
	assert.Equal(t, 2.0, value(t, families, "scheduler_partitions_unheld", nil))
	assert.Equal(t, 7.0, value(t, families, "scheduler_partition_handovers", map[string]string{"partition": "2"}))
	assert.Equal(t, 0.0, value(t, families, "scheduler_partition_handovers", map[string]string{"partition": "1"}))

	fail = true
	families = testmetrics.Scrape(t, m)
	assert.Nil(t, families["scheduler_partitions_unheld"])
	assert.Nil(t, families["scheduler_partition_handovers"])
	assert.NotNil(t, families["go_goroutines"], "the rest of the scrape is served")
}

// scheduler_replica_runs_total counts each run this replica executed, whatever its job.
func TestReplicaRunsCountEveryExecutedRun(t *testing.T) {
	t.Parallel()
	m := metrics.New()
	for _, job := range []string{"a", "billing/b", "a"} {
		m.RunStarted(job, "schedule", 0)
		m.RunFinished(job, "succeeded", "schedule", time.Second)
	}
	m.RunRecorded("a", "skipped", "schedule") // not executed here
	assert.Equal(t, 3.0, value(t, testmetrics.Scrape(t, m), "scheduler_replica_runs_total", nil))
}
