package engine

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schedulerhq/scheduler/internal/config"
	"github.com/schedulerhq/scheduler/internal/job"
	"github.com/schedulerhq/scheduler/internal/store"
)

// calledJob records in the test process, which a failover cannot roll back, each call it
// made: its run id and its slot, as a receiver logs X-Scheduler-Run-Id and the key.
type calledJob struct{ name string }

type call struct {
	runID int64
	slot  time.Time
}

var calls struct {
	sync.Mutex
	all []call
}

func (j calledJob) Name() string { return j.name }
func (j calledJob) Defaults() job.Defaults {
	return job.Defaults{Schedule: "@every 1s", Timeout: time.Minute}
}
func (j calledJob) Run(ctx context.Context, env *job.Env) (job.Stats, error) {
	var slot *time.Time
	if err := env.ReadOnly.QueryRow(ctx, `SELECT scheduled_at FROM job_runs WHERE id = $1`, env.RunID).Scan(&slot); err != nil {
		return job.Stats{}, err
	}
	if slot != nil {
		calls.Lock()
		calls.all = append(calls.all, call{runID: env.RunID, slot: slot.UTC()})
		calls.Unlock()
	}
	return job.Stats{Processed: 1}, nil
}

// Issue 29, end to end: a primary and a streaming standby, the replica's DATABASE_URL on a
// proxy; the standby falls behind (its replication link is cut), a step-down elects a term
// on the primary alone, the primary is killed (-m immediate), the standby promoted and the
// proxy switched. The replica recovers by itself and the history stays honest: no slot
// without a row or with two, no called slot recorded missed, no run id naming another slot
// than the one called under it, and the lost term's identity never passes the new fence.
func TestAsyncFailoverKeepsHistoryHonest(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("runs PostgreSQL servers as the postgres user: needs root")
	}
	pgsh, err := filepath.Abs("../../scripts/pg.sh")
	require.NoError(t, err)
	bin := "/usr/lib/postgresql/15/bin"
	if _, err := os.Stat(bin + "/pg_basebackup"); err != nil {
		t.Skip("PostgreSQL 15 binaries not found")
	}
	ctx := context.Background()
	run := func(name string, args ...string) {
		t.Helper()
		out, err := exec.Command(name, args...).CombinedOutput()
		require.NoError(t, err, "%s %v: %s", name, args, out)
	}
	asPG := func(args ...string) { run("runuser", append([]string{"-u", "postgres", "--"}, args...)...) }
	// Not t.TempDir: its parent is closed to the postgres user.
	root, err := os.MkdirTemp("", "scheduler-failover-")
	require.NoError(t, err)
	run("chmod", "755", root)
	t.Cleanup(func() { _ = os.RemoveAll(root) })
	primary, standby := filepath.Join(root, "primary"), filepath.Join(root, "standby")
	pPort, sPort := freePort(t), freePort(t)
	run(pgsh, "start", primary, fmt.Sprint(pPort))
	t.Cleanup(func() { _ = exec.Command(pgsh, "stop", primary).Run() })
	// The standby streams from the primary through a proxy: cutting it makes the lag.
	link, linkURL := startProxy(t, fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres", pPort))
	lu, _ := url.Parse(linkURL)
	require.NoError(t, os.MkdirAll(standby, 0o700))
	run("chown", "postgres:postgres", standby)
	asPG(bin+"/pg_basebackup", "-D", standby, "-h", "127.0.0.1", "-p", fmt.Sprint(pPort), "-U", "postgres", "-X", "stream")
	conf := fmt.Sprintf("port = %d\nunix_socket_directories = '%s'\nprimary_conninfo = 'host=127.0.0.1 port=%s user=postgres'\n",
		sPort, standby, lu.Port())
	f, err := os.OpenFile(filepath.Join(standby, "postgresql.conf"), os.O_APPEND|os.O_WRONLY, 0)
	require.NoError(t, err)
	_, err = f.WriteString(conf)
	require.NoError(t, err)
	require.NoError(t, f.Close())
	run("touch", filepath.Join(standby, "standby.signal"))
	run("chown", "-R", "postgres:postgres", standby)
	asPG(bin+"/pg_ctl", "-D", standby, "-l", filepath.Join(standby, "server.log"), "-w", "start")
	t.Cleanup(func() {
		_ = exec.Command("runuser", "-u", "postgres", "--", bin+"/pg_ctl", "-D", standby, "-m", "immediate", "stop").Run()
	})

	// The replicas' address: a proxy that is switched to the promoted standby.
	front, frontURL := startProxy(t, fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", pPort))
	mg, err := store.NewMigrator(frontURL)
	require.NoError(t, err)
	require.NoError(t, mg.Up())
	_ = mg.Close()

	n := startNode(t, frontURL, "a", nodeOptions{jobs: []config.Job{jobConfig(t, "called", "@every 1s", time.Minute)}})
	first := awaitTerm(t, n)
	awaitSignal(t, &n.en.testSignals.leading, "the first term")
	awaitCalls(t, 3)

	link.Stop() // the standby falls behind from here
	awaitCalls(t, len(callsSoFar())+2)
	// A step-down on the primary alone: its new term is lost with it.
	_, ok, err := n.db.RequestStepDown(ctx, store.ControlRequest{TokenKind: "test", RequestID: "failover-test"})
	require.NoError(t, err)
	require.True(t, ok)
	lost := awaitTerm(t, n)
	require.Greater(t, lost.Epoch, first.Epoch)
	awaitCalls(t, len(callsSoFar())+1)

	asPG(bin+"/pg_ctl", "-D", primary, "-m", "immediate", "stop")
	asPG(bin+"/pg_ctl", "-D", standby, "-w", "promote")
	front.Stop()
	front.Upstream = fmt.Sprintf("127.0.0.1:%d", sPort)
	require.NoError(t, front.Start())

	again := awaitTerm(t, n) // recovered without a restart
	assert.NotEmpty(t, again.FailedOver, "the new term sees the failover")
	assert.NotEqual(t, lost.Fence(), again.Fence(), "no term identity is named twice")
	awaitSignal(t, &n.en.testSignals.repaired, "the repair")
	called := callsSoFar()
	// Every called slot ends with one row, succeeded; a call's run id, where it survived,
	// still names the slot it was called for.
	require.Eventually(t, func() bool {
		return count(t, n.db, `SELECT count(*) FROM job_runs WHERE job = 'called' AND status IN ('succeeded')
			AND scheduled_at = ANY($1)`, slotsOf(called)) == len(distinctSlots(called))
	}, waitTimeout, 50*time.Millisecond, "every called slot is recorded succeeded")
	assert.Zero(t, count(t, n.db, `SELECT count(*) FROM job_runs WHERE status = 'missed' AND scheduled_at = ANY($1)`,
		slotsOf(called)), "no called slot is recorded missed")
	assert.Zero(t, count(t, n.db, `SELECT count(*) FROM (SELECT 1 FROM job_runs WHERE scheduled_at IS NOT NULL
		GROUP BY job, scheduled_at HAVING count(*) > 1) AS twice`), "no slot has two rows")
	for _, c := range called {
		var slot *time.Time
		err := n.db.Pool.QueryRow(ctx, `SELECT scheduled_at FROM job_runs WHERE id = $1`, c.runID).Scan(&slot)
		if err == nil {
			assert.True(t, slot != nil && slot.Equal(c.slot), "run id %d was called for %s, now names %v", c.runID, c.slot, slot)
		}
	}
	err = n.db.Fenced(ctx, lost.Fence(), func(*store.Tx) error { return nil })
	assert.ErrorIs(t, err, store.ErrNotLeader, "a write of the lost term does not pass the new fence")
	t.Logf("calls %d, lost term %s, new term %s (%s)", len(called), lost.Fence(), again.Fence(), again.FailedOver)
}

func freePort(t *testing.T) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func callsSoFar() []call {
	calls.Lock()
	defer calls.Unlock()
	return append([]call(nil), calls.all...)
}

func awaitCalls(t *testing.T, n int) {
	t.Helper()
	require.Eventually(t, func() bool { return len(callsSoFar()) >= n }, waitTimeout, 10*time.Millisecond, "%d calls", n)
}

func slotsOf(cs []call) []time.Time {
	out := make([]time.Time, len(cs))
	for i, c := range cs {
		out[i] = c.slot
	}
	return out
}

func distinctSlots(cs []call) map[time.Time]bool {
	out := map[time.Time]bool{}
	for _, c := range cs {
		out[c.slot] = true
	}
	return out
}
