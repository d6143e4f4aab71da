package store_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schedulerhq/scheduler/internal/store"
	"github.com/schedulerhq/scheduler/internal/testdb"
)

// The one statement that ends runs reads the day's index of active runs for a batch's ends,
// not every run of the day: its test of the status each end is from is a join condition, which
// alone would not let PostgreSQL use the partial index (2 000 ends then read all 12 000 rows
// of their day).
func TestEndsReadTheIndexOfActiveRuns(t *testing.T) {
	t.Parallel()
	db, _ := testdb.Open(t, store.Options{})
	ctx := context.Background()
	_, err := db.Pool.Exec(ctx, `UPDATE scheduler_leader SET epoch = 1`)
	require.NoError(t, err)
	// The slots are of the hour before, so all have come whatever the minute (in this hour's
	// first minutes they were early, and not claimed), on a day with its partition.
	var now time.Time
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT date_trunc('hour', now()) - interval '1 hour'`).Scan(&now))
	testdb.AddRunDays(t, db.Pool, now, now)
	var running []int64
	for round := range 6 {
		claims := make([]store.Claim, 2000)
		for i := range claims {
			claims[i] = store.Claim{Job: fmt.Sprintf("job-%04d", i), ScheduledAt: now.Add(time.Duration(round) * time.Minute),
				Trigger: store.TriggerSchedule, InstanceID: "a"}
		}
		running = running[:0]
		require.NoError(t, db.Fenced(ctx, store.Fence{Epoch: 1}, func(tx *store.Tx) error {
			out, err := tx.ClaimSlots(ctx, claims)
			for _, o := range out {
				running = append(running, o.Run.ID)
			}
			return err
		}))
		if round < 5 {
			_, err := db.Pool.Exec(ctx, `UPDATE job_runs SET status = 'succeeded', finished_at = now() WHERE id = ANY($1)`, running)
			require.NoError(t, err)
		}
	}
	_, err = db.Pool.Exec(ctx, `ANALYZE job_runs`)
	require.NoError(t, err)

	n := len(running)
	from, statuses := make([]string, n), make([]string, n)
	stats := make([]json.RawMessage, n)
	for i := range running {
		from[i], statuses[i], stats[i] = store.StatusRunning, store.StatusSucceeded, json.RawMessage(`{}`)
	}
	var plan []string
	err = pgx.BeginFunc(ctx, db.Pool, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, `EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF) `+store.EndRunsSQL,
			running, from, statuses, stats, make([]*string, n), make([]*int64, n), make([]int64, n), make([]*string, n), make([]bool, n), nil)
		if err != nil {
			return err
		}
		if plan, err = pgx.CollectRows(rows, pgx.RowTo[string]); err != nil {
			return err
		}
		return pgx.ErrTxClosed // roll back: the plan is all this wants
	})
	require.ErrorIs(t, err, pgx.ErrTxClosed)
	text := strings.Join(plan, "\n")
	assert.Contains(t, text, "_active_idx", "the ends read the index of active runs:\n%s", text)
	assert.Contains(t, text, fmt.Sprintf("Update on job_runs r (actual rows=%d", n), text)
}
