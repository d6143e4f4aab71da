package engine

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schedulerhq/scheduler/internal/store"
	"github.com/schedulerhq/scheduler/internal/store/storetest"
)

// The coordinator steps the backfills of every partition: a backfill of a job of partition 2,
// which the coordinator has not loaded, queues each slot's run once, with the backfill
// trigger, in partition 2, where partition 2's engine runs it, and then ends. Partition 2's
// engine, running beside the coordinator, steps no backfill itself (two steppers of one
// backfill would race each other's transactions for every slot).
func TestCoordinatorStepsAnotherPartitionsBackfill(t *testing.T) {
	db, url, got, job := clusterWithJob(t, 2, "0 * * * *")
	ctx := context.Background()
	hour := time.Now().UTC().Truncate(time.Hour)
	slots := []time.Time{hour.Add(-3 * time.Hour), hour.Add(-2 * time.Hour), hour.Add(-time.Hour)}

	rt := runtimeFor(t, "127.0.0.1/32")
	coordinator := startNode(t, url, "e0", nodeOptions{runtime: rt})
	own := partitionEngine(t, url, "e2", storetest.ElectPartition(ctx, t, db.Pool, 2, "e2"), rt)
	awaitSignal(t, &coordinator.en.testSignals.leading, "the coordinator led")
	awaitSignal(t, &own.testSignals.leading, "partition 2 led")

	b, err := db.CreateBackfill(ctx, store.Backfill{Job: job, Since: slots[0], Until: hour, Only: "all", Slots: slots})
	require.NoError(t, err)
	// Each of the coordinator's passes reads the backfill again, until one finds it ended.
	for deadline := time.Now().Add(waitTimeout); b.State == store.BackfillRunning; {
		require.True(t, time.Now().Before(deadline), "the backfill ended within %s (at slot %d of %d)", waitTimeout, b.Next, len(slots))
		awaitSignal(t, &coordinator.en.testSignals.backfillPass, "a pass of the coordinator's backfiller")
		b, err = db.Backfill(ctx, b.ID)
		require.NoError(t, err)
	}
	assert.Equal(t, store.BackfillDone, b.State)
	assert.Equal(t, len(slots), b.Next, "every slot was queued")

	type row struct {
		ScheduledAt time.Time
		Partition   int
		Instance    string
		Status      string
	}
	rows, err := db.Pool.Query(ctx, `SELECT scheduled_at, partition_id, instance_id, status FROM job_runs
		WHERE job = $1 AND trigger = $2 ORDER BY scheduled_at, id`, job, store.TriggerBackfill)
	require.NoError(t, err)
	runs, err := pgx.CollectRows(rows, pgx.RowToStructByPos[row])
	require.NoError(t, err)
	require.Len(t, runs, len(slots), "one backfill run per slot: %v", runs)
	for i, r := range runs {
		assert.True(t, slots[i].Equal(r.ScheduledAt), "run %d is slot %s's, not %s's", i, slots[i], r.ScheduledAt)
		assert.Equal(t, row{r.ScheduledAt, 2, "e2", store.StatusSucceeded}, r, "queued in the job's partition, run by its engine")
	}
	assert.Equal(t, len(slots), got.of(job), "each slot was called once")
	assert.Zero(t, len(own.testSignals.backfillPass.C()), "partition 2's engine made passes of a backfiller")
}
