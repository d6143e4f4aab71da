package leader

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schedulerhq/scheduler/internal/metrics"
	"github.com/schedulerhq/scheduler/internal/store"
	"github.com/schedulerhq/scheduler/internal/testdb"
	"github.com/schedulerhq/scheduler/internal/testmetrics"
)

// The partitions' metrics say what this replica holds and did: the held gauge follows Held,
// each held partition counts an election under its own label, and a drain counts its
// terms ended as released.
func TestPartitionMetrics(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := testdb.New(t)
	m := metrics.New()
	a := startPartReplica(t, url, "a", 8, func(p *Partitions) { p.conf.Metrics = m })
	b := startPartReplica(t, url, "b", 8, nil)
	awaitSettled(t, []*partReplica{a, b}, 8, 4, 4, waitTimeout)
	held := a.p.Held()
	require.NotEmpty(t, held)
	families := testmetrics.Scrape(t, m)
	assert.Equal(t, float64(len(held)), testmetrics.Series(families, "scheduler_partitions_held", nil).GetGauge().GetValue())
	for _, p := range held {
		elections := testmetrics.Series(families, "scheduler_partition_elections_total", map[string]string{"partition": fmt.Sprint(p)})
		require.NotNil(t, elections, "partition %d's elections", p)
		assert.GreaterOrEqual(t, elections.GetCounter().GetValue(), 1.0)
	}

	ok, err := a.db.RequestDrain(ctx, "a", store.ControlRequest{TokenKind: "full", RequestID: "req-1"})
	require.NoError(t, err)
	require.True(t, ok)
	awaitSettled(t, []*partReplica{b}, 8, 8, 8, waitTimeout)
	// The gauge drops as each released lock is given back, a heartbeat after its term ended.
	heldNow := func() float64 {
		return testmetrics.Series(testmetrics.Scrape(t, m), "scheduler_partitions_held", nil).GetGauge().GetValue()
	}
	for heldNow() > 0 {
		a.p.testSignals.partitionTick.Await(t, waitTimeout, "a giving its partitions back")
	}
	families = testmetrics.Scrape(t, m)
	released := testmetrics.Series(families, "scheduler_partition_terms_ended_total", map[string]string{"reason": "released"})
	require.NotNil(t, released)
	assert.GreaterOrEqual(t, released.GetCounter().GetValue(), float64(len(held)))
}
