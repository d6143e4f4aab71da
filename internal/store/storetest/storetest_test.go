package storetest_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/schedulerhq/scheduler/internal/store"
	"github.com/schedulerhq/scheduler/internal/store/storetest"
	"github.com/schedulerhq/scheduler/internal/testdb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestMain(m *testing.M) { testdb.Main(m) }

// A run is stored as production stores it: its id carries its slot's day (its creation's
// without one), the day's partition is made when missing, and the ids follow the order given.
func TestRunsAreStoredAsProductionStoresThem(t *testing.T) {
	t.Parallel()
	db, _ := testdb.Open(t, store.Options{})
	ctx := context.Background()
	old := time.Date(2021, 3, 4, 5, 6, 0, 0, time.UTC)
	created := time.Date(2021, 5, 6, 7, 8, 0, 0, time.UTC)
	runs := storetest.Runs(ctx, t, db.Pool,
		storetest.RunOpts{Job: "j", Status: store.StatusSucceeded, ScheduledAt: old, StartedAt: old, FinishedAt: old,
			InstanceID: "a", Epoch: storetest.Ptr(int64(0)), Stats: json.RawMessage(`{"n": 1}`)},
		storetest.RunOpts{Job: "j", CreatedAt: created, Reason: "why", CallbackHeartbeatTimeout: time.Minute},
		storetest.RunOpts{Job: "k"})
	require.Len(t, runs, 3)
	assert.Equal(t, store.TriggerSchedule, runs[0].Trigger)
	assert.Equal(t, store.StatusSucceeded, runs[0].Status)
	assert.Equal(t, int64(0), *runs[0].Epoch)
	assert.JSONEq(t, `{"n": 1}`, string(runs[0].Stats))
	assert.Equal(t, store.TriggerManual, runs[1].Trigger)
	assert.Equal(t, store.StatusQueued, runs[1].Status)
	assert.Nil(t, runs[1].Epoch)
	assert.JSONEq(t, `{}`, string(runs[1].Params))
	assert.True(t, created.Equal(runs[1].CreatedAt))

	for i, day := range []time.Time{old, created, time.Now()} {
		var table string
		require.NoError(t, db.Pool.QueryRow(ctx, `SELECT tableoid::regclass::text FROM job_runs WHERE id = $1`, runs[i].ID).Scan(&table))
		assert.Equal(t, "job_runs_p"+day.UTC().Format("20060102"), table, "run %d", i)
	}
	assert.Less(t, runs[0].ID, runs[1].ID)
	assert.Less(t, runs[1].ID, runs[2].ID)
	var timeline int64
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT scheduler_timeline() & 15`).Scan(&timeline))
	assert.Equal(t, timeline, runs[2].ID&15, "the id carries the timeline")

	_, err := storetest.InsertRuns(ctx, db.Pool, storetest.RunOpts{Job: "k"})
	require.Error(t, err, "a second active run of a job past its bound")
}

func TestDefinitionAndNamespace(t *testing.T) {
	t.Parallel()
	db, _ := testdb.Open(t, store.Options{})
	ctx := context.Background()
	storetest.Namespace(ctx, t, db.Pool, storetest.NamespaceOpts{Name: "billing", MaxJobs: 2})
	d := storetest.Definition(ctx, t, db.Pool, storetest.DefinitionOpts{Name: "billing/nightly"})
	assert.Equal(t, int64(1), d.Version)
	n, err := db.Namespace(ctx, "billing")
	require.NoError(t, err)
	assert.Equal(t, 2, *n.MaxJobs)
	assert.Nil(t, n.MaxConcurrentCalls)
}
