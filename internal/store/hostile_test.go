package store_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schedulerhq/scheduler/internal/store"
	"github.com/schedulerhq/scheduler/internal/testdb"
)

// A job's backend under another login (docs/design.md guarantee 12) takes, and keeps, the
// advisory locks the scheduler used to exclude itself with. Before, every manual run, slot
// claim, definition create and partition add waited on them for ever; now the scheduler's
// locks are rows of scheduler_locks, which that login cannot lock.
func TestAdvisoryLocksOfAnotherLoginDoNotStallTheScheduler(t *testing.T) {
	t.Parallel()
	db, u := testdb.Open(t, store.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	attacker, err := pgx.Connect(ctx, testdb.LoginURL(t, u))
	require.NoError(t, err)
	defer attacker.Close(context.Background())
	for _, name := range []string{"scheduler:active_runs", "scheduler:job_definitions", "scheduler:run_partitions"} {
		_, err := attacker.Exec(ctx, `SELECT pg_advisory_lock(hashtextextended($1, 0))`, name)
		require.NoError(t, err, name)
	}
	_, err = db.Pool.Exec(ctx, `UPDATE scheduler_leader SET epoch = 1`)
	require.NoError(t, err)

	// Each would have waited for ever; five seconds is plenty on a loaded machine.
	step, cancelStep := context.WithTimeout(ctx, 5*time.Second)
	defer cancelStep()
	_, created, err := db.QueueManualRun(step, "nightly", nil, []byte(`{}`))
	require.NoError(t, err, "a manual run is queued")
	assert.True(t, created)
	var now time.Time
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT date_trunc('second', now())`).Scan(&now))
	require.NoError(t, db.Fenced(step, store.Fence{Epoch: 1}, func(tx *store.Tx) error {
		_, err := tx.ClaimSlot(step, store.Claim{Job: "hourly", ScheduledAt: now, Trigger: store.TriggerSchedule, InstanceID: "a"})
		return err
	}), "a slot is claimed")
	require.NoError(t, db.Atomically(step, func(ex store.Executor) error {
		_, err := ex.CreateDefinition(step, "report", "http", json.RawMessage(`{}`), 10)
		return err
	}), "a runtime job is created")
	_, err = db.Pool.Exec(step, `SELECT scheduler_add_run_day(current_date + 40)`)
	require.NoError(t, err, "a day partition is added")

	// And the scheduler's own locks are out of the other login's reach.
	_, err = attacker.Exec(ctx, `SELECT 1 FROM scheduler_locks FOR UPDATE`)
	var pgErr *pgconn.PgError
	require.True(t, errors.As(err, &pgErr), "locking scheduler_locks as another login: %v", err)
	assert.Equal(t, "42501", pgErr.Code, "insufficient privilege")
}
