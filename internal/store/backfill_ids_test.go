package store_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schedulerhq/scheduler/internal/store"
	"github.com/schedulerhq/scheduler/internal/testdb"
)

// TestBackfillIdsCannotBeWalked: backfill ids are drawn at random, not counted, so two of a
// team's own backfills say nothing of how many other teams made in between, and nobody
// finds another's backfill by trying the next number. They stay positive integers below
// 2^53, which a client's JavaScript reads exactly.
func TestBackfillIdsCannotBeWalked(t *testing.T) {
	t.Parallel()
	db, _ := testdb.Open(t, store.Options{InstanceID: "backfill-ids", LeaseTimeout: time.Minute})
	ctx := context.Background()
	since := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	const n = 20
	ids := make([]int64, 0, n)
	for i := range n {
		b, err := db.CreateBackfill(ctx, store.Backfill{Job: fmt.Sprintf("ops/job-%d", i), Since: since,
			Until: since.Add(time.Hour), Only: "all", Slots: []time.Time{since}})
		require.NoError(t, err)
		ids = append(ids, b.ID)
		got, err := db.Backfill(ctx, b.ID)
		require.NoError(t, err)
		assert.Equal(t, b.Job, got.Job)
	}
	var near int
	for i := 1; i < n; i++ {
		assert.Positive(t, ids[i])
		assert.Less(t, ids[i], int64(1)<<53)
		if d := ids[i] - ids[i-1]; d > -1000 && d < 1000 {
			near++
		}
	}
	assert.Zero(t, near, "backfill ids follow each other: %v", ids)
	running, err := db.RunningBackfills(ctx)
	require.NoError(t, err)
	require.Len(t, running, n)
	assert.Equal(t, ids[0], running[0].ID, "the leader still works oldest first")
	assert.Equal(t, ids[n-1], running[n-1].ID)
	_, err = db.CreateBackfill(ctx, store.Backfill{Job: "ops/job-0", Since: since, Until: since.Add(time.Hour), Only: "all", Slots: []time.Time{since}})
	assert.ErrorIs(t, err, store.ErrBackfillRunning, "one running backfill per job still")
}
