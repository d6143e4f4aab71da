package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schedulerhq/scheduler/internal/store"
	"github.com/schedulerhq/scheduler/internal/store/storetest"
	"github.com/schedulerhq/scheduler/internal/testdb"
)

// A cluster no replica has made yet has one partition, the coordinator's, and nobody holds
// it before an election.
func TestPartitionHoldingsOfAClusterNotMadeYet(t *testing.T) {
	t.Parallel()
	db, _ := testdb.Open(t, store.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	list, err := db.PartitionHoldings(ctx, 5*time.Second)
	require.NoError(t, err)
	require.Len(t, list, 1)
	assert.Equal(t, store.PartitionHolding{Partition: 0}, list[0])
	jobs, err := db.PartitionJobs(ctx)
	require.NoError(t, err)
	assert.Empty(t, jobs)
}

// A partition is held while its holder renews it within the lease: a dead or paused holder
// keeps its name in the row, not the partition. The coordinator holds partition 0 while it
// holds the leader lock, and, once it renews its row, while it renews it.
func TestPartitionHoldingsSayWhoHoldsWhatNow(t *testing.T) {
	t.Parallel()
	db, _ := testdb.Open(t, store.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const lease = 5 * time.Second
	_, err := db.Pool.Exec(ctx, `
		INSERT INTO scheduler_cluster (partitions) VALUES (4);
		UPDATE scheduler_leader SET epoch = 7, instance_id = 'r1', term_id = gen_random_uuid(), since = now();
		-- 1: r2 renewed a second ago; 2: r3 stopped renewing a minute ago; 3: no row.
		INSERT INTO scheduler_partitions (partition_id, epoch, term_id, holder, since, renewed_at, handovers)
		VALUES (1, 3, gen_random_uuid(), 'r2', now() - interval '1 hour', now() - interval '1 second', 2),
		       (2, 5, gen_random_uuid(), 'r3', now() - interval '1 hour', now() - interval '1 minute', 4)`)
	require.NoError(t, err)
	for i, p := range []int{0, 1, 1, 2} {
		storetest.Definition(ctx, t, db.Pool, storetest.DefinitionOpts{Name: []string{"a", "b", "c", "d"}[i]})
		_, err := db.Pool.Exec(ctx, `UPDATE job_definitions SET partition_id = $1 WHERE name = $2`, p, []string{"a", "b", "c", "d"}[i])
		require.NoError(t, err)
	}

	// Nobody holds the leader lock: the coordinator's row names r1, who holds nothing.
	list, err := db.PartitionHoldings(ctx, lease)
	require.NoError(t, err)
	require.Len(t, list, 4)
	held := func() map[int]bool {
		m := map[int]bool{}
		for _, p := range list {
			m[p.Partition] = p.Held
		}
		return m
	}
	assert.Equal(t, map[int]bool{0: false, 1: true, 2: false, 3: false}, held())
	assert.Equal(t, "r1", list[0].LastHolder)
	assert.Equal(t, int64(7), list[0].Epoch)
	assert.Equal(t, []string{"r1", "r2", "r3", ""}, []string{list[0].LastHolder, list[1].LastHolder, list[2].LastHolder, list[3].LastHolder})
	assert.Equal(t, []int64{0, 2, 4, 0}, []int64{list[0].Handovers, list[1].Handovers, list[2].Handovers, list[3].Handovers})
	require.NotNil(t, list[1].TermID)
	require.NotNil(t, list[1].RenewedAt)
	assert.Nil(t, list[3].TermID)
	assert.Nil(t, list[3].Since)

	// r1 takes the leader lock: it holds partition 0 until its renewals (once it makes them)
	// fall behind the lease, as a paused leader's do.
	session, err := db.OpenLockSession(ctx)
	require.NoError(t, err)
	defer session.Close()
	require.NoError(t, session.Lock(ctx))
	list, err = db.PartitionHoldings(ctx, lease)
	require.NoError(t, err)
	assert.True(t, held()[0], "the leader lock is held and the row has no renewal yet")
	_, err = db.Pool.Exec(ctx, `UPDATE scheduler_leader SET renewed_at = now() - interval '10 seconds'`)
	require.NoError(t, err)
	list, err = db.PartitionHoldings(ctx, lease)
	require.NoError(t, err)
	assert.False(t, held()[0], "a leader that stopped renewing holds the lock, not the partition")
	_, err = db.Pool.Exec(ctx, `UPDATE scheduler_leader SET renewed_at = now()`)
	require.NoError(t, err)
	list, err = db.PartitionHoldings(ctx, lease)
	require.NoError(t, err)
	assert.True(t, held()[0], "renewing again")
	// Its lock session ends (the replica died): the lock goes with it, and the partition.
	// The server ends the backend a moment after the connection closes: awaited, with a deadline.
	session.Close()
	require.Eventually(t, func() bool {
		list, err = db.PartitionHoldings(ctx, lease)
		return err == nil && !held()[0]
	}, 10*time.Second, 20*time.Millisecond, "a fresh renewal without the lock is no holder")

	jobs, err := db.PartitionJobs(ctx)
	require.NoError(t, err)
	assert.Equal(t, map[int]int64{0: 1, 1: 2, 2: 1}, jobs)

	// What every replica exports for the alerts: 0, 2 and 3 have no holder.
	unheld, handovers, err := db.PartitionGauges(ctx, lease)
	require.NoError(t, err)
	assert.Equal(t, 3, unheld)
	assert.Equal(t, map[int]int64{1: 2, 2: 4, 3: 0}, handovers)
}
