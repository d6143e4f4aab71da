package storetest

import (
	"context"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/schedulerhq/scheduler/internal/store"
)

// Cluster makes the database a cluster of n partitions, as its first replica does: the
// number in scheduler_cluster, and a row in scheduler_partitions for each of 1..n-1, held by
// nobody. Definitions created afterwards hash onto the n partitions.
func Cluster(ctx context.Context, t testing.TB, db DBTX, n int) {
	t.Helper()
	_, err := db.Exec(ctx, `
		WITH cluster AS (
			INSERT INTO scheduler_cluster (id, partitions) VALUES (1, $1)
			ON CONFLICT (id) DO UPDATE SET partitions = excluded.partitions
		)
		INSERT INTO scheduler_partitions (partition_id) SELECT generate_series(1, $1 - 1)
		ON CONFLICT DO NOTHING`, n)
	if err != nil {
		t.Fatalf("storetest: make a cluster of %d partitions: %v", n, err)
	}
}

// ElectPartition elects instance for partition p (p ≥ 1, its row made by Cluster) the way
// its election does, without the lock: the epoch bumped, a new term id, the holder, since and
// renewal now. The previous term's writes fail with store.ErrNotLeader from then on. It
// returns the new term's fence.
func ElectPartition(ctx context.Context, t testing.TB, db DBTX, p int, instance string) store.Fence {
	t.Helper()
	rows, err := db.Query(ctx, `
		UPDATE scheduler_partitions
		SET epoch = epoch + 1, term_id = $3, since = now(), renewed_at = now(),
		    handovers = handovers + CASE WHEN holder IS DISTINCT FROM $2 THEN 1 ELSE 0 END, holder = $2
		WHERE partition_id = $1
		RETURNING epoch, term_id`, p, instance, uuid.New())
	if err != nil {
		t.Fatalf("storetest: elect %s for partition %d: %v", instance, p, err)
	}
	term, err := pgx.CollectExactlyOneRow(rows, pgx.RowToStructByPos[struct {
		Epoch  int64
		TermID uuid.UUID
	}])
	if err != nil {
		t.Fatalf("storetest: elect %s for partition %d (is its row there? storetest.Cluster): %v", instance, p, err)
	}
	f := store.Fence{Partition: p, Epoch: term.Epoch, TermID: term.TermID}
	return f
}
