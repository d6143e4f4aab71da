package store_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schedulerhq/scheduler/internal/store"
	"github.com/schedulerhq/scheduler/internal/store/storetest"
	"github.com/schedulerhq/scheduler/internal/testdb"
)

// partitionOf is scheduler_partition_of(name, n), read from the database.
func partitionOf(t *testing.T, db *testdb.DB, name string, n int) int {
	t.Helper()
	var p int
	require.NoError(t, db.Pool.QueryRow(context.Background(), `SELECT scheduler_partition_of($1, $2)`, name, n).Scan(&p))
	return p
}

// jobIn returns a job name of partition p of n, different from every name of avoid.
func jobIn(t *testing.T, db *testdb.DB, n, p int, avoid ...string) string {
	t.Helper()
	var name string
	require.NoError(t, db.Pool.QueryRow(context.Background(), `
		SELECT name FROM (SELECT 'job-' || i AS name, i FROM generate_series(1, 1000) AS i) AS c
		WHERE scheduler_partition_of(name, $1) = $2 AND name <> ALL($3) ORDER BY i LIMIT 1`, n, p, append([]string{}, avoid...)).Scan(&name))
	return name
}

func create(t *testing.T, db *testdb.DB, name string) store.StoredDefinition {
	t.Helper()
	d, err := db.CreateDefinition(context.Background(), name, "http", json.RawMessage(`{}`), 10_000)
	require.NoError(t, err)
	return d
}

func runPartition(t *testing.T, db *testdb.DB, id int64) int {
	t.Helper()
	var p int
	require.NoError(t, db.Pool.QueryRow(context.Background(), `SELECT partition_id FROM job_runs WHERE id = $1`, id).Scan(&p))
	return p
}

// A definition is stored in its name's partition (0 before the cluster wrote its number),
// and the runs the API queues for it (manual runs, re-runs) go into that partition, whose
// leader runs them; a built-in job's into partition 0.
func TestDefinitionsAndQueuedRunsLandInTheJobsPartition(t *testing.T) {
	t.Parallel()
	db, _ := testdb.Open(t, store.Options{})
	ctx := context.Background()
	assert.Equal(t, 0, create(t, db, "before-the-cluster").Partition, "a cluster without its row is one partition")

	storetest.Cluster(ctx, t, db.Pool, 4)
	for _, name := range []string{"alpha", "beta", "gamma", "delta", "epsilon"} {
		d := create(t, db, name)
		assert.Equal(t, partitionOf(t, db, name, 4), d.Partition, name)
		stored, err := db.Definition(ctx, name)
		require.NoError(t, err)
		assert.Equal(t, d.Partition, stored.Partition, "%s as read back", name)
	}
	job := jobIn(t, db, 4, 3)
	create(t, db, job)
	run, created, err := db.QueueManualRun(ctx, job, nil, []byte(`{}`))
	require.NoError(t, err)
	require.True(t, created)
	assert.Equal(t, 3, runPartition(t, db, run.ID), "a manual run is queued in its job's partition")
	_, _, err = db.CancelRun(ctx, run.ID)
	require.NoError(t, err)

	slot := time.Now().UTC().Truncate(time.Minute)
	rerun, created, err := db.QueueSlotRun(ctx, job, slot, store.TriggerRerun, nil, nil)
	require.NoError(t, err)
	require.True(t, created)
	assert.Equal(t, 3, runPartition(t, db, rerun.ID), "a re-run is queued in its job's partition")

	builtin, _, err := db.QueueManualRun(ctx, "data-retention", nil, []byte(`{}`))
	require.NoError(t, err)
	assert.Equal(t, 0, runPartition(t, db, builtin.ID), "a built-in job's run is the coordinator's")

	defs, err := db.PartitionDefinitions(ctx, 3)
	require.NoError(t, err)
	for _, d := range defs {
		assert.Equal(t, 3, d.Partition, d.Name)
	}
	assert.Contains(t, names(defs), job)
}

func names(defs []store.StoredDefinition) []string {
	var out []string
	for _, d := range defs {
		out = append(out, d.Name)
	}
	return out
}

// The claims of two partitions do not wait for each other: while a transaction of partition
// 2 holds its active runs' lock, partition 1's leader claims a slot at once. A writer of the
// same partition (a manual trigger of another of its jobs) still waits for it, as the bound
// of active runs needs.
func TestPartitionClaimsDoNotWaitForAnotherPartition(t *testing.T) {
	t.Parallel()
	db, _ := testdb.Open(t, store.Options{})
	ctx := context.Background()
	storetest.Cluster(ctx, t, db.Pool, 3)
	a, b := jobIn(t, db, 3, 1), jobIn(t, db, 3, 2)
	b2 := jobIn(t, db, 3, 2, b)
	for _, name := range []string{a, b, b2} {
		create(t, db, name)
	}
	f1 := storetest.ElectPartition(ctx, t, db.Pool, 1, "r1")
	f2 := storetest.ElectPartition(ctx, t, db.Pool, 2, "r2")
	slot := time.Now().UTC().Truncate(time.Second).Add(-time.Minute)
	claim := func(job string) store.Claim {
		return store.Claim{Job: job, ScheduledAt: slot, Trigger: store.TriggerSchedule, InstanceID: "r"}
	}

	holding, release, held := make(chan struct{}), make(chan struct{}), make(chan error, 1)
	go func() {
		held <- db.Fenced(ctx, f2, func(tx *store.Tx) error {
			out, err := tx.ClaimSlots(ctx, []store.Claim{claim(b)})
			if err == nil && out[0].Run == nil {
				t.Errorf("partition 2's claim did not win: %+v", out[0])
			}
			close(holding)
			<-release
			return err
		})
	}()
	select {
	case <-holding:
	case err := <-held:
		t.Fatalf("partition 2's claim ended early: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("partition 2's claim did not take its lock")
	}
	defer close(release)

	quick, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	var out []store.ClaimOutcome
	err := db.Fenced(quick, f1, func(tx *store.Tx) error {
		var err error
		out, err = tx.ClaimSlots(quick, []store.Claim{claim(a)})
		return err
	})
	require.NoError(t, err, "partition 1's claim waited for partition 2's transaction")
	require.NotNil(t, out[0].Run)
	assert.Equal(t, 1, runPartition(t, db, out[0].Run.ID))

	queued := make(chan error, 1)
	go func() {
		_, _, err := db.QueueManualRun(ctx, b2, nil, []byte(`{}`))
		queued <- err
	}()
	require.Eventually(t, func() bool {
		var waiting bool
		err := db.Pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE '%scheduler_locks%')`).Scan(&waiting)
		return err == nil && waiting
	}, 10*time.Second, 10*time.Millisecond, "a trigger in partition 2 waits for partition 2's lock")
	release <- struct{}{}
	require.NoError(t, <-held)
	require.NoError(t, <-queued)
}

// A login writing job_runs directly cannot pass a job's bound by naming another partition
// in the row: the check counts the job's runs under the lock of the job's own partition.
func TestActiveBoundHoldsWhateverPartitionARowNames(t *testing.T) {
	t.Parallel()
	db, _ := testdb.Open(t, store.Options{})
	ctx := context.Background()
	storetest.Cluster(ctx, t, db.Pool, 3)
	job := jobIn(t, db, 3, 2)
	create(t, db, job)
	_, created, err := db.QueueManualRun(ctx, job, nil, []byte(`{}`))
	require.NoError(t, err)
	require.True(t, created)
	_, err = storetest.InsertRuns(ctx, db.Pool, storetest.RunOpts{Job: job, Status: store.StatusRunning, Partition: 1})
	require.ErrorContains(t, err, "more queued or running runs than its bound")
}

// A partition leader's reads across jobs see only its partition: partition 2's running run
// (its cancel asked for, its callback expired) is partition 2's leader's alone, though
// partition 1's term has the same epoch number. (Backfills are not read per partition: the
// coordinator steps every partition's.)
func TestPartitionReadsSeeOnlyTheirPartition(t *testing.T) {
	t.Parallel()
	db, _ := testdb.Open(t, store.Options{})
	ctx := context.Background()
	storetest.Cluster(ctx, t, db.Pool, 3)
	b := jobIn(t, db, 3, 2)
	b2 := jobIn(t, db, 3, 2, b)
	create(t, db, b)
	create(t, db, b2)
	f1 := storetest.ElectPartition(ctx, t, db.Pool, 1, "r1")
	f2 := storetest.ElectPartition(ctx, t, db.Pool, 2, "r2")
	require.Equal(t, f1.Epoch, f2.Epoch, "the two partitions' terms have the same epoch number")
	past := time.Now().Add(-time.Hour)
	running := storetest.Run(ctx, t, db.Pool, storetest.RunOpts{Job: b, Status: store.StatusRunning, StartedAt: past,
		InstanceID: "r2", Epoch: &f2.Epoch, Partition: 2, CancelRequested: true})
	expired := storetest.Run(ctx, t, db.Pool, storetest.RunOpts{Job: b2, Status: store.StatusRunning, StartedAt: past,
		InstanceID: "r2", Epoch: &f2.Epoch, Partition: 2, CallbackAcceptedAt: past, CallbackHeartbeatAt: past,
		CallbackHeartbeatTimeout: time.Minute, CallbackDeadline: past.Add(time.Minute)})
	reads := func(f store.Fence) (cancels, runs []int64, ended []store.Ended, abandoned []store.Abandoned) {
		t.Helper()
		cancels, err := db.CancelRequested(ctx, f.Partition, f.Epoch)
		require.NoError(t, err)
		runs, err = db.RunningRuns(ctx, f.Partition, f.Epoch)
		require.NoError(t, err)
		require.NoError(t, db.Fenced(ctx, f, func(tx *store.Tx) error {
			if ended, err = tx.ExpireCallbacks(ctx, nil); err != nil {
				return err
			}
			abandoned, err = tx.AbandonRuns(ctx, nil, []int64{running.ID})
			return err
		}))
		return cancels, runs, ended, abandoned
	}
	cancels, runs, ended, abandoned := reads(f1)
	assert.Empty(t, cancels, "partition 1 sees no cancel request of partition 2's runs")
	assert.Empty(t, runs, "partition 1 sees no running run of partition 2's")
	assert.Empty(t, ended, "partition 1 ends no callback run of partition 2's")
	assert.Empty(t, abandoned, "partition 1 abandons no run of partition 2's, even one named as its orphan")

	cancels, runs, ended, abandoned = reads(f2)
	assert.Equal(t, []int64{running.ID}, cancels)
	assert.Equal(t, []int64{running.ID}, runs)
	require.Len(t, ended, 1)
	assert.Equal(t, expired.ID, ended[0].ID)
	require.Len(t, abandoned, 1, "partition 2 abandons its own orphan")
	assert.Equal(t, running.ID, abandoned[0].ID)
}
