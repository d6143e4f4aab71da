package main

import (
	"context"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schedulerhq/scheduler/internal/testdb"
)

func TestMain(m *testing.M) { testdb.Main(m) }

// TestChaosShortRunKeepsEveryInvariant is `make chaos` in 20 seconds: three real
// `scheduler serve` processes, the leader killed (SIGKILL or SIGTERM) every 2 to 4 seconds
// and restarted, members coming due all the time; afterwards every due member is applied
// exactly once, no slot is claimed twice, nothing is left running, and every kill was
// followed by a new leader.
func TestChaosShortRunKeepsEveryInvariant(t *testing.T) {
	if testing.Short() {
		t.Skip("chaos run: 20 s of real processes; skipped with -short")
	}
	dir := t.TempDir()
	binary := filepath.Join(dir, "scheduler")
	goTool, err := exec.LookPath("go")
	if err != nil {
		goTool = filepath.Join(runtime.GOROOT(), "bin", "go")
	}
	build := exec.Command(goTool, "build", "-o", binary, "./cmd/scheduler")
	build.Dir = testdb.RepoRoot()
	out, err := build.CombinedOutput()
	require.NoError(t, err, "build the scheduler: %s", out)

	url := testdb.New(t)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Second)
	defer cancel()
	res, err := Run(ctx, Config{
		DatabaseURL: url, Binary: binary, WorkDir: dir,
		Duration: 20 * time.Second, KillMin: 2 * time.Second, KillMax: 4 * time.Second,
		Settle: 15 * time.Second,
		Log:    slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
	})
	require.NoError(t, err)

	assert.Empty(t, res.Violations(), "replica logs: %s", dir)
	assert.GreaterOrEqual(t, len(res.Handovers), 3, "the leader must have been killed several times")
	assert.Positive(t, res.MembersInserted)
	assert.Equal(t, res.MembersInserted, res.MembersApplied, "every inserted member is due and must be applied once")
	assert.Greater(t, res.Epoch, int64(len(res.Handovers)), "each kill must have produced a new epoch")
}
