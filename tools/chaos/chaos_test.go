package main

import (
	"context"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schedulerhq/scheduler/internal/seed"
	"github.com/schedulerhq/scheduler/internal/store"
	"github.com/schedulerhq/scheduler/internal/store/storetest"
	"github.com/schedulerhq/scheduler/internal/testdb"
)

func TestMain(m *testing.M) { testdb.Main(m) }

// testBinary builds the scheduler into a directory of the test (the build cache makes a
// second build a link).
func testBinary(t *testing.T) string {
	t.Helper()
	binary := filepath.Join(t.TempDir(), "scheduler")
	build := exec.Command("go", "build", "-o", binary, "./cmd/scheduler")
	build.Dir = testdb.RepoRoot()
	out, err := build.CombinedOutput()
	require.NoError(t, err, "build the scheduler: %s", out)
	return binary
}

// workDir returns a directory for the replicas' logs, removed when the test passes and kept
// (its path logged) when it fails: a failed chaos run is read in those logs.
func workDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "chaos-"+strings.ReplaceAll(t.Name(), "/", "-")+"-")
	require.NoError(t, err)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the replicas' logs are kept in %s", dir)
			return
		}
		_ = os.RemoveAll(dir)
	})
	return dir
}

// TestChaosShortRunKeepsEveryInvariant is `make chaos` in 20 seconds: three real
// `scheduler serve` processes sharing 8 partitions, the leader struck every 2 to 4 seconds by
// SIGKILL, SIGTERM, the termination of its backends, a blackhole or a SIGSTOP past its lease
// (pg-restart is left to internal/engine's TestPostgresRestartMidRun: this cluster is
// shared), members coming due all the time and 20 runtime HTTP jobs every second spread over
// the partitions; afterwards every due member is applied exactly once, no slot is claimed
// twice or lost, no key called twice without cause, nothing is left running or unrecovered,
// nothing of an old term (the leader's or a partition's) committed after a newer one began,
// no partition went unheld past the lease + 3 s, and every fault was followed by a new leader.
func TestChaosShortRunKeepsEveryInvariant(t *testing.T) {
	if testing.Short() {
		t.Skip("chaos run: 20 s of real processes; skipped with -short")
	}
	dir := workDir(t)
	binary := testBinary(t)

	url := testdb.New(t)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Second)
	defer cancel()
	res, err := Run(ctx, Config{
		DatabaseURL: url, Binary: binary, WorkDir: dir,
		Duration: 20 * time.Second, KillMin: 2 * time.Second, KillMax: 4 * time.Second,
		Settle: 15 * time.Second, Lease: 2 * time.Second,
		Faults:     []string{FaultKill, FaultTerm, FaultTerminate, FaultBlackhole, FaultPause},
		Partitions: 8, RuntimeJobs: 20,
		Log: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
	})
	require.NoError(t, err)

	assert.Empty(t, res.Violations(), "replica logs: %s", dir)
	assert.GreaterOrEqual(t, len(res.Handovers), 3, "the leader must have been struck several times")
	assert.Positive(t, res.MembersInserted)
	assert.Equal(t, res.MembersInserted, res.MembersApplied, "every inserted member is due and must be applied once")
	assert.Greater(t, res.Epoch, int64(len(res.Handovers)), "each fault must have produced a new epoch")
	assert.Positive(t, res.HostileRuns, "the hostile SQL loop ran")
	assert.Positive(t, res.RuntimeKeys, "the runtime jobs on the partitions called their receiver")
	assert.Greater(t, len(res.RuntimeRunsByInstance), 1, "more than one replica ran the partitions' jobs")
}

// TestCheckCountsViolations shows the checker is not blind: a due member nobody applied, a
// member changed without its history row, a run of an old epoch left running, slots
// without a row and an abandoned run nobody re-ran are each counted and make Violations
// non-empty.
func TestCheckCountsViolations(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, testdb.New(t))
	require.NoError(t, err)
	defer pool.Close()
	_, err = seed.Members(ctx, pool, 0)
	require.NoError(t, err)
	r := &runner{pool: pool, cfg: Config{Log: slog.New(slog.DiscardHandler)}} // the stuck run is logged
	_, err = pool.Exec(ctx, insertChaosMembersSQL, 1, 3)
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `
UPDATE members SET pending_membership_plan_id = NULL, pending_membership_start_date = NULL,
                   pending_membership_end_date = NULL, pending_membership_price = NULL
WHERE email = 'chaos-3@chaos.example';
UPDATE scheduler_leader SET epoch = 2`)
	require.NoError(t, err)
	now := time.Now()
	epoch := storetest.Ptr(int64(1))
	storetest.Runs(ctx, t, pool,
		storetest.RunOpts{Job: "plan-change", Status: store.StatusRunning, ScheduledAt: now.Truncate(time.Second), StartedAt: now, Epoch: epoch},
		storetest.RunOpts{Job: "plan-change", Status: store.StatusSucceeded, ScheduledAt: now.Truncate(time.Second).Add(-3 * time.Second),
			StartedAt: now, Epoch: epoch},
		storetest.RunOpts{Job: "plan-change", Status: store.StatusAbandoned, StartedAt: now, FinishedAt: now, Epoch: epoch})

	res := &Result{Settled: true}
	require.NoError(t, r.check(ctx, res))
	assert.Equal(t, int64(2), res.DueNotApplied)
	assert.Equal(t, int64(1), res.AppliedWithoutHistory)
	assert.Equal(t, int64(1), res.StuckRunning)
	assert.Equal(t, int64(2), res.LostSlots)
	assert.Equal(t, int64(1), res.UnrecoveredAbandoned)
	assert.Zero(t, res.DuplicateHistory)
	assert.Len(t, res.Violations(), 5)
}
