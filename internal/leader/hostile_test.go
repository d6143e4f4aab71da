package leader

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schedulerhq/scheduler/internal/testdb"
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
	role := testdb.Role(t, url, `GRANT SELECT, UPDATE ON scheduler_leader TO %s`)
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
