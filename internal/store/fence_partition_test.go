package store_test

import (
	"context"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/schedulerhq/scheduler/internal/store"
	"github.com/schedulerhq/scheduler/internal/testdb"
)

// TestFencedByPartitionTerm: a fence of partition p ≥ 1 is checked against p's row of
// scheduler_partitions alone: it commits under p's current term, fails with ErrNotLeader
// once p was elected again, and another partition's or the coordinator's election does not
// touch it.
func TestFencedByPartitionTerm(t *testing.T) {
	ctx := context.Background()
	db, _ := testdb.Open(t, store.Options{})
	term1, term2 := uuid.New(), uuid.New()
	_, err := db.Pool.Exec(ctx, `
		INSERT INTO scheduler_partitions (partition_id, epoch, term_id, holder, since)
		VALUES (1, 4, $1, 'a', now()), (2, 7, $2, 'b', now())`, term1, term2)
	require.NoError(t, err)
	write := func(f store.Fence) error {
		return db.Fenced(ctx, f, func(tx *store.Tx) error {
			_, err := tx.Exec(ctx, `SELECT 1`)
			return err
		})
	}
	p1 := store.Fence{Partition: 1, Epoch: 4, TermID: term1}
	p2 := store.Fence{Partition: 2, Epoch: 7, TermID: term2}
	require.NoError(t, write(p1))
	require.NoError(t, write(p2))
	require.ErrorIs(t, write(store.Fence{Partition: 1, Epoch: 7, TermID: term2}), store.ErrNotLeader,
		"partition 2's term must not pass partition 1's fence")

	_, err = db.Pool.Exec(ctx, `UPDATE scheduler_leader SET epoch = epoch + 1, term_id = gen_random_uuid()`)
	require.NoError(t, err)
	require.NoError(t, write(p1), "the coordinator's election must not end partition 1's term")

	_, err = db.Pool.Exec(ctx, `UPDATE scheduler_partitions SET epoch = 5, term_id = gen_random_uuid() WHERE partition_id = 1`)
	require.NoError(t, err)
	require.ErrorIs(t, write(p1), store.ErrNotLeader)
	require.NoError(t, write(p2), "partition 1's election must not end partition 2's term")
}
