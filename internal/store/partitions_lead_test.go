package store_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schedulerhq/scheduler/internal/store"
	"github.com/schedulerhq/scheduler/internal/testdb"
)

// Replicas starting together all make the same cluster: one writes it, the others wait for
// its commit and agree; definitions made before are re-hashed onto the partitions; a replica
// started with another count is refused with what to do.
func TestEnsureClusterConcurrentFirstStartsAgree(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	u := testdb.New(t)
	pool := testdb.Pool(t, u)
	for i := range 20 {
		_, err := pool.Exec(ctx, `INSERT INTO job_definitions (name, kind, definition) VALUES ($1, 'http', '{}')`,
			fmt.Sprintf("job-%d", i))
		require.NoError(t, err)
	}
	var wg sync.WaitGroup
	errs := make([]error, 8)
	for i := range errs {
		db := testdb.Connect(t, u, store.Options{InstanceID: fmt.Sprintf("r%d", i)})
		wg.Add(1)
		go func() { defer wg.Done(); errs[i] = db.EnsureCluster(ctx, 8) }()
	}
	wg.Wait()
	for i, err := range errs {
		assert.NoError(t, err, "replica %d", i)
	}
	var count, rows, wrong, spread int
	require.NoError(t, pool.QueryRow(ctx, `SELECT partitions FROM scheduler_cluster`).Scan(&count))
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM scheduler_partitions`).Scan(&rows))
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FILTER (WHERE partition_id <> scheduler_partition_of(name, 8)),
		count(DISTINCT partition_id) FROM job_definitions`).Scan(&wrong, &spread))
	assert.Equal(t, 8, count)
	assert.Equal(t, 7, rows, "rows of partitions 1..7")
	assert.Zero(t, wrong, "every definition re-hashed")
	assert.Greater(t, spread, 1, "20 jobs spread over several partitions")

	db := testdb.Connect(t, u, store.Options{InstanceID: "late"})
	err := db.EnsureCluster(ctx, 4)
	require.ErrorIs(t, err, store.ErrPartitionsMismatch)
	assert.Contains(t, err.Error(), "SCHEDULER_PARTITIONS=8")
	assert.Contains(t, err.Error(), "scheduler partitions set 4")
}

// The partition count changes only with every replica stopped; then it re-lays the rows and
// re-hashes the definitions.
func TestSetPartitionsRefusesWhileAReplicaIsLive(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, u := testdb.Open(t, store.Options{})
	pool := testdb.Pool(t, u)
	require.NoError(t, db.EnsureCluster(ctx, 4))
	_, err := pool.Exec(ctx, `INSERT INTO job_definitions (name, kind, definition) VALUES ('a', 'http', '{}')`)
	require.NoError(t, err)
	_, err = db.HeartbeatInstance(ctx, store.Instance{InstanceID: "live", StartedAt: time.Now()})
	require.NoError(t, err)
	err = db.SetPartitions(ctx, 16, time.Minute)
	require.ErrorIs(t, err, store.ErrReplicasLive)
	assert.Contains(t, err.Error(), "live")

	require.NoError(t, db.DeleteInstance(ctx, "live"))
	require.NoError(t, db.SetPartitions(ctx, 16, time.Minute))
	var count, rows, wrong int
	require.NoError(t, pool.QueryRow(ctx, `SELECT partitions FROM scheduler_cluster`).Scan(&count))
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM scheduler_partitions`).Scan(&rows))
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM job_definitions
		WHERE partition_id <> scheduler_partition_of(name, 16)`).Scan(&wrong))
	assert.Equal(t, []int{16, 15, 0}, []int{count, rows, wrong})
	require.NoError(t, db.SetPartitions(ctx, 2, time.Minute))
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM scheduler_partitions`).Scan(&rows))
	assert.Equal(t, 1, rows, "rows of partitions beyond the new count are dropped")
}

// A write fenced by a partition's term commits while the term is current and fails with
// ErrNotLeader once the partition's epoch moved on; the leader row's term is not involved.
func TestFencedByAPartitionTerm(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, u := testdb.Open(t, store.Options{})
	pool := testdb.Pool(t, u)
	require.NoError(t, db.EnsureCluster(ctx, 4))
	session, err := db.OpenPartitionSession(ctx)
	require.NoError(t, err)
	defer session.Close()
	ok, err := session.TryLock(ctx, 2)
	require.NoError(t, err)
	require.True(t, ok)
	_, cur, _, err := session.Elect(ctx, 2, "a", time.Second, false)
	require.NoError(t, err)
	f := store.Fence{Partition: 2, Epoch: cur.Epoch, TermID: cur.TermID}
	require.NoError(t, db.Fenced(ctx, f, func(tx *store.Tx) error { return nil }))

	_, err = pool.Exec(ctx, `UPDATE scheduler_partitions SET epoch = epoch + 1 WHERE partition_id = 2`)
	require.NoError(t, err)
	err = db.Fenced(ctx, f, func(tx *store.Tx) error { return nil })
	assert.ErrorIs(t, err, store.ErrNotLeader)
	renewed, err := session.Renew(ctx, []store.Fence{f})
	require.NoError(t, err)
	assert.Empty(t, renewed, "a replaced term is not renewed")
}
