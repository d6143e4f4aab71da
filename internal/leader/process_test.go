package leader

import (
	"context"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/schedulerhq/scheduler/internal/testdb"
)

// childDBVar names the database a child replica of TestStoppedProcessIsTakenOver runs on.
const childDBVar = "LEADER_CHILD_DATABASE_URL"

// TestPartitionsChildProcess is not a test of its own: run by TestStoppedProcessIsTakenOver
// as a child process, it is a replica (an Elector and Partitions, 16 partitions) named
// "child" until it is killed.
func TestPartitionsChildProcess(t *testing.T) {
	url := os.Getenv(childDBVar)
	if url == "" {
		t.Skip("a child process of TestStoppedProcessIsTakenOver")
	}
	startPartReplica(t, url, "child", 16, nil)
	<-make(chan struct{})
}

// A real replica process stopped with SIGSTOP keeps its connections, and with them its
// locks, open and idle; its instance row and its renewals go stale. The child is the
// coordinator: the two other replicas take all 16 partitions, the coordinator's 0 included,
// within the lease and 3 s. Continued, the child finds its connections gone and rejoins: the three share the
// partitions again.
func TestStoppedProcessIsTakenOver(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := testdb.New(t)
	child := exec.Command(os.Args[0], "-test.run=^TestPartitionsChildProcess$", "-test.count=1")
	// TEST_DATABASE_URL set keeps the child's TestMain from starting a PostgreSQL of its own.
	child.Env = append(os.Environ(), childDBVar+"="+url, "TEST_DATABASE_URL="+url)
	require.NoError(t, child.Start())
	t.Cleanup(func() {
		_ = child.Process.Signal(syscall.SIGCONT)
		_ = child.Process.Kill()
		_ = child.Wait()
	})
	pool := testdb.Pool(t, url)
	// The child is started first, so it is the coordinator: its stop must move partition 0 too.
	require.Eventually(t, func() bool {
		var leader string
		_ = pool.QueryRow(ctx, `SELECT coalesce(instance_id, '') FROM scheduler_leader`).Scan(&leader)
		return leader == "child"
	}, waitTimeout, 10*time.Millisecond, "the child elected coordinator")
	rs := []*partReplica{startPartReplica(t, url, "a", 16, nil), startPartReplica(t, url, "b", 16, nil)}
	childHolds := func() int {
		var n int
		require.NoError(t, pool.QueryRow(ctx, `
			SELECT (SELECT count(*) FROM scheduler_partitions
			        WHERE holder = 'child' AND renewed_at > now() - interval '1 second')
			     + (SELECT count(*) FROM scheduler_leader WHERE instance_id = 'child')`).Scan(&n))
		return n
	}
	inProcess := func() int { return len(rs[0].holds()) + len(rs[1].holds()) }
	awaitHeld := func(what string, within time.Duration, ok func() bool) time.Duration {
		t.Helper()
		start := time.Now()
		deadline := time.After(within)
		for !ok() {
			select {
			case <-rs[0].p.testSignals.partitionTick.C():
			case <-deadline:
				t.Fatalf("%s: not within %s (in process %d, child %d)", what, within, inProcess(), childHolds())
			}
		}
		return time.Since(start)
	}
	awaitHeld("the child holding its share", waitTimeout, func() bool { return childHolds() >= 5 && inProcess()+childHolds() == 16 })

	require.NoError(t, child.Process.Signal(syscall.SIGSTOP))
	took := awaitHeld("the stopped child's partitions taken", partLease+3*time.Second, func() bool { return inProcess() == 16 })
	t.Logf("a SIGSTOPped coordinator's partitions, 0 included, were all led by the others %s after the signal (lease %s)",
		took, partLease)

	require.NoError(t, child.Process.Signal(syscall.SIGCONT))
	awaitHeld("the continued child rejoining", waitTimeout, func() bool { return childHolds() >= 5 && inProcess()+childHolds() == 16 })
}
