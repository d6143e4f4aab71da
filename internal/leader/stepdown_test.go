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

// An operator's step-down, asked through any replica's database handle, makes the leader
// resign at once; the follower takes over with a new epoch, and the old leader stays in the
// election: asked again, leadership comes back to it.
func TestStepDownHandsOverAndRejoins(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := testdb.New(t)
	a := startReplica(t, url, "a", 2*time.Second)
	termA := awaitTerm(t, a, "a leading")
	require.Equal(t, int64(1), termA.Epoch)
	b := startReplica(t, url, "b", 2*time.Second)
	// b waits for the lock inside PostgreSQL before the step-down is asked, so it is first
	// in line when a lets go.
	require.Eventually(t, func() bool { return waitingForLeaderLock(t, b) }, waitTimeout, 20*time.Millisecond)

	asked, ok, err := b.db.RequestStepDown(ctx, operator)
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, "a", asked.InstanceID)
	assert.Equal(t, int64(1), asked.Epoch)

	assert.Equal(t, int64(1), await(t, &a.e.testSignals.lostLeadership, "a resigns"))
	var handledBy, requestID string
	require.NoError(t, b.db.Pool.QueryRow(ctx, `SELECT handled_by, request_id FROM scheduler_control
		WHERE kind = 'step-down' AND epoch = 1 AND handled_at IS NOT NULL`).Scan(&handledBy, &requestID))
	assert.Equal(t, "a", handledBy, "the leader marks the row it obeyed")
	assert.Equal(t, "test", requestID)
	require.Error(t, termA.Ctx.Err(), "the resigned term's context must be over")
	termB := awaitTerm(t, b, "b leading")
	assert.Equal(t, int64(2), termB.Epoch)
	isLeader, _ := a.e.IsLeader()
	assert.False(t, isLeader)

	// a is still running, as a follower: the next step-down hands leadership back to it.
	require.Eventually(t, func() bool { return waitingForLeaderLock(t, a) }, waitTimeout, 20*time.Millisecond)
	asked, ok, err = a.db.RequestStepDown(ctx, operator)
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, "b", asked.InstanceID)
	termA2 := awaitTerm(t, a, "leadership back to a")
	assert.Equal(t, int64(3), termA2.Epoch)
	assert.Equal(t, "a", leaderRow(t, a.db).InstanceID)
}

// A step-down with nobody holding the lock answers ok=false (the API's 409), and a request
// naming an ended epoch does not depose the leader elected after it.
func TestStepDownWithoutLeaderAndStaleRequest(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := testdb.New(t)
	a := startReplica(t, url, "a", 2*time.Second)
	termA := awaitTerm(t, a, "a leading")
	a.stop()
	_, ok, err := a.db.RequestStepDown(ctx, operator)
	require.NoError(t, err)
	assert.False(t, ok, "the leader row names a replica that no longer holds the lock")

	b := startReplica(t, url, "b", 2*time.Second)
	termB := awaitTerm(t, b, "b leading")
	require.Greater(t, termB.Epoch, termA.Epoch)
	for len(b.e.testSignals.heartbeat.C()) > 0 {
		<-b.e.testSignals.heartbeat.C() // heartbeats before the request
	}
	_, err = b.db.Pool.Exec(ctx, `SELECT pg_notify('scheduler_leader_step_down', $1)`, "1")
	require.NoError(t, err)
	// Three heartbeats later, each after a wait for step-down requests, b has read the
	// notification (a heartbeat already counted when it was sent is at most the first) and
	// still leads under the same term.
	for range 3 {
		require.Equal(t, termB.Epoch, b.e.testSignals.heartbeat.Await(t, 10*time.Second, "a heartbeat of b's term"))
	}
	require.NoError(t, termB.Ctx.Err())
	isLeader, epoch := b.e.IsLeader()
	assert.True(t, isLeader)
	assert.Equal(t, termB.Epoch, epoch)
}

// operator is who asks for the step-downs of these tests.
var operator = store.ControlRequest{TokenKind: "full", RequestID: "test"}

// waitingForLeaderLock reports whether r's lock session waits in pg_advisory_lock.
func waitingForLeaderLock(t *testing.T, r *replica) bool {
	var n int
	require.NoError(t, r.db.Pool.QueryRow(context.Background(), `
		SELECT count(*) FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
		WHERE l.locktype = 'advisory' AND NOT l.granted AND a.application_name = $1`,
		"scheduler:"+r.id).Scan(&n))
	return n > 0
}

// A step-down whose notification was lost (sent while the replica's notifier was
// reconnecting; here a row written without one) is obeyed once the notifier is back: its
// resync event wakes the leader to read the control rows.
func TestStepDownIsReadAfterTheNotifierReconnects(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := testdb.New(t)
	a := startReplica(t, url, "a", 2*time.Second)
	termA := awaitTerm(t, a, "a leading")
	_, err := a.db.Pool.Exec(ctx, `INSERT INTO scheduler_control (kind, epoch, token_kind, request_id)
		VALUES ('step-down', $1, 'full', 'lost-notification')`, termA.Epoch)
	require.NoError(t, err)
	_, err = a.db.Pool.Exec(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity
		WHERE datname = current_database() AND pid <> pg_backend_pid() AND query LIKE '%LISTEN %'`)
	require.NoError(t, err)
	assert.Equal(t, termA.Epoch, await(t, &a.e.testSignals.lostLeadership, "a resigning after the resync"))
	var handledBy string
	require.NoError(t, a.db.Pool.QueryRow(ctx, `SELECT handled_by FROM scheduler_control
		WHERE request_id = 'lost-notification'`).Scan(&handledBy))
	assert.Equal(t, "a", handledBy)
}
