// Package jobstest runs job bodies in tests the way the engine does, without an elector: on
// a test database made the leader's at epoch 1, every write fenced by that epoch, reads
// through the read-only pool, and a run row of its own.
package jobstest

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/schedulerhq/scheduler/internal/jobcontract"
	"github.com/schedulerhq/scheduler/internal/store"
	"github.com/schedulerhq/scheduler/internal/store/storetest"
	"github.com/schedulerhq/scheduler/internal/testdb"
)

// Epoch is the leader's epoch the test database is given.
const Epoch = 1

// NewEnv makes db the leader's at Epoch (bypassing the elector), records a running manual run
// of the job named name, and returns the run's environment with its clock at now.
func NewEnv(t testing.TB, db *testdb.DB, name string, now time.Time) *jobcontract.Env {
	t.Helper()
	ctx := context.Background()
	_, err := db.Pool.Exec(ctx, `UPDATE scheduler_leader SET epoch = $1`, Epoch)
	require.NoError(t, err)
	runID := storetest.Run(ctx, t, db.Pool, storetest.RunOpts{Job: name, Status: store.StatusRunning,
		StartedAt: time.Now(), Epoch: storetest.Ptr(int64(Epoch))}).ID
	return &jobcontract.Env{
		RunID:    runID,
		Tx:       fencedTx(db.DB),
		ReadOnly: db.ReadOnly(),
		Log:      slog.New(slog.DiscardHandler).With("run_id", runID, "job", name),
		Now:      now,
	}
}

// fencedTx is job.Env.Tx on db, fenced by Epoch.
func fencedTx(db *store.DB) func(ctx context.Context, fn func(pgx.Tx) error) error {
	return func(ctx context.Context, fn func(pgx.Tx) error) error {
		return db.Fenced(ctx, store.Fence{Epoch: Epoch}, func(tx *store.Tx) error { return fn(tx) })
	}
}

// At is env with its clock set to now.
func At(env *jobcontract.Env, now time.Time) *jobcontract.Env {
	e := *env
	e.Now = now
	return &e
}
