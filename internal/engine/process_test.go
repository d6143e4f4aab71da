package engine

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schedulerhq/scheduler/internal/store"
	"github.com/schedulerhq/scheduler/internal/testdb"
	"github.com/schedulerhq/scheduler/internal/testpace"
)

// These tests run real `scheduler serve` processes. The job on "@every 1s" is the real
// rounds-close job (SCHEDULER_JOB_ROUNDS_CLOSE_SCHEDULE), which does nothing on an empty
// database; the other jobs are disabled so only its slots are claimed.
const processJob = "rounds-close"

// buildScheduler builds the binary into dir.
func buildScheduler(tb testing.TB, dir string) string {
	tb.Helper()
	bin := filepath.Join(dir, "scheduler")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/scheduler")
	cmd.Dir = testdb.RepoRoot()
	out, err := cmd.CombinedOutput()
	require.NoError(tb, err, "go build ./cmd/scheduler:\n%s", out)
	return bin
}

type process struct {
	id  string
	cmd *exec.Cmd
	log string
}

func startProcess(tb testing.TB, bin, dbURL, id string) *process {
	tb.Helper()
	return startProcessIn(tb, "", bin, dbURL, id)
}

// startProcessIn starts `scheduler serve` inside the network namespace netns ("": this
// one), with env added to the test defaults.
func startProcessIn(tb testing.TB, netns, bin, dbURL, id string, env ...string) *process {
	tb.Helper()
	logPath := filepath.Join(filepath.Dir(bin), id+".log")
	logFile, err := os.Create(logPath)
	require.NoError(tb, err)
	cmd := exec.Command(bin, "serve")
	if netns != "" {
		cmd = exec.Command("ip", "netns", "exec", netns, bin, "serve")
	}
	cmd.Env = append(os.Environ(),
		"DATABASE_URL="+dbURL,
		"SCHEDULER_INSTANCE_ID="+id,
		"SCHEDULER_HTTP_ADDR=127.0.0.1:0",
		"SCHEDULER_LOG_FORMAT=text",
		"SCHEDULER_LEASE_TIMEOUT=2s",
		"SCHEDULER_JOB_ROUNDS_CLOSE_SCHEDULE=@every 1s",
		"SCHEDULER_JOB_ROUNDS_CREATE_ENABLED=false",
		"SCHEDULER_JOB_ROUNDS_OPEN_ENABLED=false",
	)
	cmd.Env = append(cmd.Env, env...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	require.NoError(tb, cmd.Start())
	p := &process{id: id, cmd: cmd, log: logPath}
	tb.Cleanup(func() {
		if p.cmd.ProcessState == nil {
			_ = p.cmd.Process.Kill()
			_ = p.cmd.Wait()
		}
		logFile.Close()
		if tb.Failed() {
			b, _ := os.ReadFile(logPath)
			tb.Logf("log of %s:\n%s", id, b)
		}
	})
	return p
}

// awaitLeaderOtherThan waits until the leader row names one of procs other than not, with
// an epoch above minEpoch.
func awaitLeader(tb testing.TB, db *testdb.DB, procs map[string]*process, minEpoch int64) store.LeaderRow {
	tb.Helper()
	var row store.LeaderRow
	deadline := time.Now().Add(testpace.Scaled(30 * time.Second))
	for time.Now().Before(deadline) {
		r, err := db.Leader(context.Background())
		if err == nil && r.Epoch > minEpoch && procs[r.InstanceID] != nil && procs[r.InstanceID].cmd.ProcessState == nil {
			return r
		}
		time.Sleep(10 * time.Millisecond)
	}
	tb.Fatalf("no live process became leader above epoch %d (last seen %+v)", minEpoch, row)
	return row
}

// firstClaimOf returns the created_at of the first slot claim of epoch, waiting for it.
func firstClaimOf(tb testing.TB, db *testdb.DB, epoch int64) time.Time {
	tb.Helper()
	var at time.Time
	deadline := time.Now().Add(testpace.Scaled(30 * time.Second))
	for time.Now().Before(deadline) {
		err := db.Pool.QueryRow(context.Background(), `
			SELECT min(created_at) FROM job_runs
			WHERE job = $1 AND epoch = $2 AND status IN ('running', 'succeeded') AND scheduled_at IS NOT NULL
			HAVING count(*) > 0`, processJob, epoch).Scan(&at)
		if err == nil {
			return at
		}
		time.Sleep(10 * time.Millisecond)
	}
	tb.Fatalf("epoch %d never claimed a slot", epoch)
	return at
}

func TestProcessesKillAndTermHandOver(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the scheduler binary")
	}
	t.Parallel()
	ctx := context.Background()
	db, dbURL := testdb.Open(t, store.Options{InstanceID: "observer"})
	bin := buildScheduler(t, t.TempDir())
	procs := map[string]*process{}
	for i := range 3 {
		p := startProcess(t, bin, dbURL, fmt.Sprintf("proc-%d", i))
		procs[p.id] = p
	}

	first := awaitLeader(t, db, procs, 0)
	firstClaimOf(t, db, first.Epoch)

	// kill -9: PostgreSQL drops the dead leader's lock session, a follower takes over.
	require.NoError(t, procs[first.InstanceID].cmd.Process.Kill())
	_ = procs[first.InstanceID].cmd.Wait()
	second := awaitLeader(t, db, procs, first.Epoch)
	assert.NotEqual(t, first.InstanceID, second.InstanceID)
	firstClaimOf(t, db, second.Epoch)

	// SIGTERM: the leader resigns and exits cleanly; the last process takes over.
	leaderProc := procs[second.InstanceID]
	require.NoError(t, leaderProc.cmd.Process.Signal(syscall.SIGTERM))
	err := leaderProc.cmd.Wait()
	var exit *exec.ExitError
	require.False(t, errors.As(err, &exit), "SIGTERM must exit 0, got %v", err)
	third := awaitLeader(t, db, procs, second.Epoch)
	firstClaimOf(t, db, third.Epoch)

	// No slot ran twice, and from the first to the last slot none is without a row.
	runs := runsOf(t, db, processJob)
	var slots []time.Time
	for _, r := range runs {
		if r.ScheduledAt != nil {
			slots = append(slots, *r.ScheduledAt)
		}
	}
	sort.Slice(slots, func(i, j int) bool { return slots[i].Before(slots[j]) })
	for i := 1; i < len(slots); i++ {
		require.Equal(t, time.Second, slots[i].Sub(slots[i-1]), "slots must be consecutive and unique around %s", slots[i])
	}
	// The clean shutdown removed its instance row; the killed one's is left to go stale.
	list, err := db.Instances(ctx)
	require.NoError(t, err)
	for _, in := range list {
		assert.NotEqual(t, second.InstanceID, in.InstanceID, "a SIGTERMed replica removes its row")
	}
}

// BenchmarkHandover measures, with real processes, the time from kill -9 (or SIGTERM) of
// the leader to the new leader's election (ms/election) and to its first claimed slot
// (ms/first-claim, which includes waiting for the next due slot of the "@every 1s" job when
// the old leader had already claimed the current one).
// Run: go test -run '^$' -bench Handover -benchtime 5x ./internal/engine/
func BenchmarkHandover(b *testing.B) {
	b.Run("kill", func(b *testing.B) { benchmarkHandover(b, syscall.SIGKILL) })
	b.Run("term", func(b *testing.B) { benchmarkHandover(b, syscall.SIGTERM) })
}

func benchmarkHandover(b *testing.B, sig syscall.Signal) {
	db, dbURL := testdb.Open(b, store.Options{InstanceID: "observer"})
	bin := buildScheduler(b, b.TempDir())
	procs := map[string]*process{}
	for i := range 2 {
		p := startProcess(b, bin, dbURL, fmt.Sprintf("bench-%d", i))
		procs[p.id] = p
	}
	cur := awaitLeader(b, db, procs, 0)
	firstClaimOf(b, db, cur.Epoch)
	var election, firstClaim time.Duration
	b.ResetTimer()
	for i := range b.N {
		killedAt, err := db.Now(context.Background())
		require.NoError(b, err)
		require.NoError(b, procs[cur.InstanceID].cmd.Process.Signal(sig))
		_ = procs[cur.InstanceID].cmd.Wait()
		next := awaitLeader(b, db, procs, cur.Epoch)
		claimedAt := firstClaimOf(b, db, next.Epoch)
		election += next.Since.Sub(killedAt)
		firstClaim += claimedAt.Sub(killedAt)
		// Keep a follower waiting for the next round.
		p := startProcess(b, bin, dbURL, fmt.Sprintf("bench-%d", i+2))
		procs[p.id] = p
		cur = next
	}
	b.StopTimer()
	b.ReportMetric(float64(election.Milliseconds())/float64(b.N), "ms/election")
	b.ReportMetric(float64(firstClaim.Milliseconds())/float64(b.N), "ms/first-claim")
}
