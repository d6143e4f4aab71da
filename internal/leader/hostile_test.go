package leader

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schedulerhq/scheduler/internal/metrics"
	"github.com/schedulerhq/scheduler/internal/store"
	"github.com/schedulerhq/scheduler/internal/testdb"
	"github.com/schedulerhq/scheduler/internal/testmetrics"
)

// Attacks on the election by a backend that is not the scheduler's: another team's job
// connected to the scheduler's database under a login of its own (docs/design.md guarantee
// 12). Each test gives the attacker only what the attack needs.

// trapCancels holds FOR SHARE on the leader row and swallows every cancel request, as a
// hostile job's statement would; only pg_terminate_backend ends it.
const trapCancels = `
DO $$
BEGIN
    PERFORM 1 FROM scheduler_leader WHERE id = 1 FOR SHARE;
    LOOP
        BEGIN
            PERFORM pg_sleep(0.05);
        EXCEPTION WHEN query_canceled THEN
            NULL;
        END;
    END LOOP;
END $$`

// attack runs stmt as the attacker (roleURL) on a connection of its own, after the setup
// statements, and returns the attacker's backend pid and the statement's outcome. The test's
// end terminates the backend if nothing else did, and waits for it.
func attack(t *testing.T, roleURL, adminURL, stmt string, setup ...string) (pid int32, done <-chan error) {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, roleURL)
	require.NoError(t, err)
	for _, s := range setup {
		_, err := conn.Exec(ctx, s)
		require.NoError(t, err)
	}
	require.NoError(t, conn.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&pid))
	out := make(chan error, 1)
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		// Not cancellable: the statement traps cancels; only a termination ends it.
		_, err := conn.Exec(ctx, stmt)
		out <- err
		_ = conn.Close(ctx)
	}()
	t.Cleanup(func() {
		if admin, err := pgx.Connect(ctx, adminURL); err == nil {
			_, _ = admin.Exec(ctx, `SELECT pg_terminate_backend($1)`, pid)
			_ = admin.Close(ctx)
		}
		select {
		case <-finished:
		case <-time.After(waitTimeout):
			t.Errorf("the attacker's backend %d did not end", pid)
		}
	})
	return pid, out
}

// A job's backend that renamed itself (so no application_name leads to it) holds FOR SHARE
// on the leader row and traps cancels. Before, the epoch bump terminated only backends named
// scheduler:<old leader> after each lease and retried for ever: no leader again. Now it
// terminates whatever holds a lock on the leader row, and a leader is elected within the
// lease and a little.
func TestElectionSurvivesAHostileLeaderRowLock(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := testdb.New(t)
	role := testdb.LoginURL(t, url, `GRANT SELECT, UPDATE ON scheduler_leader TO %s`)
	// An old leader that is gone, as after a crash.
	pool := testdb.Pool(t, url)
	_, err := pool.Exec(ctx, `UPDATE scheduler_leader SET epoch = 1, instance_id = 'old', since = now()`)
	require.NoError(t, err)
	pid, held := attack(t, role, url, trapCancels, `SET application_name = 'innocent'`)
	require.Eventually(t, func() bool {
		var n int
		err := pool.QueryRow(ctx, `SELECT count(*) FROM pg_locks WHERE pid = $1 AND granted
			AND relation = 'scheduler_leader'::regclass AND mode = 'RowShareLock'`, pid).Scan(&n)
		return err == nil && n == 1
	}, waitTimeout, 10*time.Millisecond, "the attacker holds the leader row FOR SHARE")
	var cancelled bool
	require.NoError(t, pool.QueryRow(ctx, `SELECT pg_cancel_backend($1)`, pid).Scan(&cancelled))
	require.True(t, cancelled)

	const lease = time.Second
	start := time.Now()
	r := startReplica(t, url, "new", lease)
	select {
	case term := <-r.sub.C():
		assert.Equal(t, int64(2), term.Epoch)
		assert.Less(t, time.Since(start), lease+3*time.Second)
	case <-time.After(lease + 3*time.Second):
		t.Fatalf("no leader within the lease (%s) and 3 s while a job's backend holds the leader row", lease)
	}
	select {
	case err := <-held:
		assert.Error(t, err, "the attacker's backend was terminated")
	case <-time.After(waitTimeout):
		t.Fatal("the attacker's backend outlived the election")
	}
}

// Any login may NOTIFY any channel. A job's backend floods the step-down channel: once with
// every epoch from 1 to 1000 (the leader's among them), then 1000 times with the leader's
// epoch, each in a transaction of its own (PostgreSQL folds identical notifications of one
// transaction). Before, the first flood made the leader resign, unaudited. Now the leader
// obeys rows of scheduler_control only: it keeps leading, counts every notification as
// ignored, and reads its control rows a bounded number of times (one per cooldown).
func TestStepDownNotificationFloodIsIgnored(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := testdb.New(t)
	m := metrics.New()
	r := startReplicaWithMetrics(t, url, "a", 2*time.Second, m)
	term := awaitTerm(t, r, "a leading")
	require.Equal(t, int64(1), term.Epoch)
	attacker, err := pgx.Connect(ctx, testdb.LoginURL(t, url))
	require.NoError(t, err)
	defer attacker.Close(ctx)

	flood := time.Now()
	_, err = attacker.Exec(ctx, `SELECT pg_notify('scheduler_leader_step_down', g::text) FROM generate_series(1, 1000) AS g`)
	require.NoError(t, err)
	_, err = attacker.Exec(ctx, `DO $$ BEGIN
		FOR i IN 1..1000 LOOP PERFORM pg_notify('scheduler_leader_step_down', '1'); COMMIT; END LOOP; END $$`)
	require.NoError(t, err)
	ignored := func() float64 {
		return testmetrics.Series(testmetrics.Scrape(t, m), "scheduler_control_notifications_ignored_total",
			map[string]string{"channel": "scheduler_leader_step_down"}).GetCounter().GetValue()
	}
	require.Eventually(t, func() bool { return ignored() == 2000 }, waitTimeout, 10*time.Millisecond,
		"every notification is counted ignored")
	elapsed := time.Since(flood)

	require.NoError(t, term.Ctx.Err(), "the term goes on")
	isLeader, epoch := r.e.IsLeader()
	assert.True(t, isLeader)
	assert.Equal(t, term.Epoch, epoch)
	reads, wakeups := 0, 0
	for len(r.e.testSignals.controlRead.C()) > 0 {
		wakeups += <-r.e.testSignals.controlRead.C()
		reads++
	}
	assert.Equal(t, 1001, wakeups, "the wake-ups that named the leader's epoch")
	// One read per cooldown, the first at once, and one for the notifier's resync, which
	// may fall inside the flood.
	assert.LessOrEqual(t, reads, int(elapsed/controlCooldown)+2, "one read per cooldown at most")
	t.Logf("2000 notifications in %s cost %d reads of the control rows", elapsed, reads)
}

// electionLock is the election's advisory lock, as another login would take it.
const electionLock = `SELECT pg_advisory_lock(hashtextextended('scheduler-leader', 0))`

// A job's backend under another login (which needs no privilege at all for it) takes the
// election's advisory lock before any replica: before, no replica could ever lead. Now a
// waiting follower terminates it within a poll interval and is elected.
func TestElectionLockHeldByAnotherLoginIsTaken(t *testing.T) {
	t.Parallel()
	url := testdb.New(t)
	role := testdb.LoginURL(t, url)
	attacker, err := pgx.Connect(context.Background(), role)
	require.NoError(t, err)
	t.Cleanup(func() { _ = attacker.Close(context.Background()) })
	_, err = attacker.Exec(context.Background(), `SET application_name = 'scheduler:a'`)
	require.NoError(t, err)
	_, err = attacker.Exec(context.Background(), electionLock)
	require.NoError(t, err)

	r := startReplica(t, url, "a", 2*time.Second)
	term := awaitTerm(t, r, "a leading once the lock's holder is terminated")
	assert.Equal(t, int64(1), term.Epoch)
	assert.Error(t, attacker.Ping(context.Background()), "the attacker's backend is gone")
}

// A job's backend under another login queues for the election's lock behind the leader, to
// take over when it lets go. The leader terminates it within a poll interval.
func TestElectionLockAwaitedByAnotherLoginIsEnded(t *testing.T) {
	t.Parallel()
	url := testdb.New(t)
	r := startReplica(t, url, "a", 2*time.Second)
	awaitTerm(t, r, "a leading")
	_, waited := attack(t, testdb.LoginURL(t, url), url, electionLock)
	select {
	case err := <-waited:
		assert.Error(t, err, "the waiter was terminated, not granted the lock")
	case <-time.After(waitTimeout):
		t.Fatal("a backend of another login still waits for the election's lock")
	}
	isLeader, _ := r.e.IsLeader()
	assert.True(t, isLeader)
}

// When the scheduler's login may not terminate the backend on the election's lock (it is
// neither a superuser nor in pg_signal_backend), the replica says exactly what to grant.
func TestElectionLockHolderThatCannotBeEndedNamesTheGrant(t *testing.T) {
	t.Parallel()
	url := testdb.New(t)
	// The scheduler's own login, with what a replica needs and no right to signal others.
	login := testdb.LoginURL(t, url, `GRANT ALL ON ALL TABLES IN SCHEMA public TO %s`,
		`GRANT ALL ON ALL SEQUENCES IN SCHEMA public TO %s`)
	attacker, err := pgx.Connect(context.Background(), testdb.LoginURL(t, url))
	require.NoError(t, err)
	t.Cleanup(func() { _ = attacker.Close(context.Background()) })
	_, err = attacker.Exec(context.Background(), electionLock)
	require.NoError(t, err)

	r := startReplica(t, login, "a", 2*time.Second)
	refusal := r.e.testSignals.refused.Await(t, waitTimeout, "the refusal to terminate")
	assert.ErrorIs(t, refusal, store.ErrCannotTerminate)
	var name string
	require.NoError(t, r.db.Pool.QueryRow(context.Background(), `SELECT current_user`).Scan(&name))
	assert.Contains(t, refusal.Error(), "GRANT pg_signal_backend TO "+pgx.Identifier{name}.Sanitize())
	isLeader, _ := r.e.IsLeader()
	assert.False(t, isLeader)
}

// A job's backend under another login takes a partition's advisory lock (no privilege
// needed), calling itself a replica, and keeps running a statement so that it never looks
// like a paused holder: while it held the lock, no replica could lead that partition. The
// guard terminates it and a replica is elected for the partition.
func TestPartitionLockHeldByAnotherLoginIsTaken(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := testdb.New(t)
	db := testdb.Connect(t, url, store.Options{InstanceID: "setup"})
	require.NoError(t, db.EnsureCluster(ctx, 4))
	const busy = `DO $$
BEGIN
    LOOP
        BEGIN
            PERFORM pg_sleep(0.05);
        EXCEPTION WHEN query_canceled THEN
            NULL;
        END;
    END LOOP;
END $$`
	_, held := attack(t, testdb.LoginURL(t, url), url, busy, `SET application_name = 'scheduler:a'`,
		`SELECT pg_advisory_lock(hashtextextended('scheduler-partition', 3))`)

	r := startPartReplica(t, url, "a", 4, nil)
	deadline := time.After(waitTimeout)
	for !slices.Contains(r.p.Held(), 3) {
		select {
		case <-r.p.testSignals.partitionTick.C():
		case <-deadline:
			t.Fatal("partition 3 not led while another login's backend holds its lock")
		}
	}
	select {
	case err := <-held:
		assert.Error(t, err, "the attacker's backend was terminated")
	case <-time.After(waitTimeout):
		t.Fatal("the attacker's backend outlived the election")
	}
}

// A login granted UPDATE on the leader row by mistake holds it FOR SHARE during a term and
// traps cancels. The leader's renewal (an UPDATE) would wait behind it, its renewals would
// go stale, and the lock would be taken from a live leader. The guard ends the attacker's
// backend instead, and the term goes on.
func TestHostileLeaderRowLockDuringATermIsEnded(t *testing.T) {
	t.Parallel()
	url := testdb.New(t)
	role := testdb.LoginURL(t, url, `GRANT SELECT, UPDATE ON scheduler_leader TO %s`)
	r := startReplica(t, url, "a", 2*time.Second)
	term := awaitTerm(t, r, "a leading")
	_, held := attack(t, role, url, trapCancels, `SET application_name = 'innocent'`)
	select {
	case err := <-held:
		assert.Error(t, err, "the attacker's backend was terminated")
	case <-time.After(waitTimeout):
		t.Fatal("the attacker's backend outlived a lease")
	}
	// Heartbeats after the attack, and one lease later the same term.
	deadline := time.Now().Add(2*time.Second + time.Second)
	for time.Now().Before(deadline) {
		await(t, &r.e.testSignals.heartbeat, "a heartbeat after the attack")
	}
	require.NoError(t, term.Ctx.Err(), "the term goes on")
	isLeader, epoch := r.e.IsLeader()
	assert.True(t, isLeader)
	assert.Equal(t, term.Epoch, epoch)
}
