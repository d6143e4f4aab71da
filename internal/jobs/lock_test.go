package jobs_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schedulerhq/scheduler/internal/jobcontract"
	"github.com/schedulerhq/scheduler/internal/jobs/jobstest"
	"github.com/schedulerhq/scheduler/internal/store"
	"github.com/schedulerhq/scheduler/internal/testdb"
)

// runNow is the fixed clock of the tests' runs; "today" for the membership jobs is its date.
var runNow = time.Date(2026, 3, 15, 2, 0, 0, 0, time.UTC)

// newEnv is a run environment for job at runNow (jobstest.NewEnv).
func newEnv(t *testing.T, db *testdb.DB, j string) *jobcontract.Env {
	return jobstest.NewEnv(t, db, j, runNow)
}

// runTogether runs job n times at once on env, released together, and returns each run's stats.
func runTogether(t *testing.T, j jobcontract.Job, env *jobcontract.Env, n int) []jobcontract.Stats {
	t.Helper()
	stats := make([]jobcontract.Stats, n)
	errs := make([]error, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			stats[i], errs[i] = j.Run(context.Background(), env)
		}()
	}
	close(start)
	wg.Wait()
	for i, err := range errs {
		require.NoError(t, err, "run %d", i)
	}
	return stats
}

// holdLock takes job's lock on entity id in a transaction left open until the test ends.
func holdLock(t *testing.T, db *testdb.DB, j string, id int64) {
	t.Helper()
	ctx := context.Background()
	tx, err := db.Pool.Begin(ctx)
	require.NoError(t, err)
	t.Cleanup(func() { _ = tx.Rollback(context.Background()) })
	locked, err := jobcontract.TryLockAll(ctx, tx, j, []int64{id})
	require.NoError(t, err)
	require.Equal(t, []int64{id}, locked)
}

func TestTryLockAllSkipsEntitiesHeldElsewhere(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, _ := testdb.Open(t, store.Options{})
	holdLock(t, db, "probe", 2)

	tx, err := db.Pool.Begin(ctx)
	require.NoError(t, err)
	defer tx.Rollback(ctx)
	locked, err := jobcontract.TryLockAll(ctx, tx, "probe", []int64{3, 2, 1})
	require.NoError(t, err)
	assert.Equal(t, []int64{3, 1}, locked, "the entity locked by another transaction is skipped, the order kept")

	// Another job's lock on the same id is a different key.
	locked, err = jobcontract.TryLockAll(ctx, tx, "other-job", []int64{2})
	require.NoError(t, err)
	assert.Equal(t, []int64{2}, locked)
}
