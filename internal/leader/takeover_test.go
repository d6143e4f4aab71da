package leader

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schedulerhq/scheduler/internal/store"
	"github.com/schedulerhq/scheduler/internal/testdb"
)

// A leader whose loop stops (as a SIGSTOPped process's) keeps the leader lock on a live,
// idle connection: before, no follower ever led again. Now its renewal goes older than the
// lease, a follower's guard ends its lock backend, and a follower leads within the lease and
// 3 s; the paused leader's fenced write fails, and once resumed it steps down.
func TestPausedLeaderIsTakenOver(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := testdb.New(t)
	var gate pauseGate
	a := startReplicaWith(t, url, "a", 2*time.Second, nil, func(e *Elector) {
		e.beforeHeartbeat = gate.wait
	})
	// Registered after the replicas' own cleanups, so it runs before them.
	t.Cleanup(gate.resume)
	term := awaitTerm(t, a, "a leading")
	b := startReplica(t, url, "b", 2*time.Second)
	await(t, &a.e.testSignals.heartbeat, "a heartbeat of a, with b following")

	gate.pause()
	start := time.Now()
	select {
	case bTerm := <-b.sub.C():
		assert.Greater(t, bTerm.Epoch, term.Epoch)
		t.Logf("b leads %s after a's pause", time.Since(start))
	case <-time.After(2*time.Second + 3*time.Second):
		t.Fatal("no follower led within the lease and 3 s of the leader's pause")
	}
	err := a.db.Fenced(ctx, term.Fence(), func(tx *store.Tx) error { return nil })
	require.ErrorIs(t, err, store.ErrNotLeader)

	gate.resume()
	await(t, &a.e.testSignals.lostLeadership, "the resumed leader stepping down")
	assert.Error(t, term.Ctx.Err(), "the paused leader's term ended")
}
