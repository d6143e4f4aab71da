package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schedulerhq/scheduler/internal/config"
	"github.com/schedulerhq/scheduler/internal/store"
	"github.com/schedulerhq/scheduler/internal/testdb"
)

// Guarantee 8: a half-dead old leader holding a fenced transaction open cannot block the
// hand-over beyond the lease: the bump terminates its backends, and the old transaction
// can no longer commit.
func TestBumpEpochTerminatesOldLeaderBackendsAfterTheLease(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	u := testdb.New(t)
	// The old leader's pool; its long idle-in-transaction timeout leaves the bump to end it.
	oldDB, err := store.Open(ctx, u, store.Options{InstanceID: "old", LeaseTimeout: time.Minute})
	require.NoError(t, err)
	defer oldDB.Close()
	pool := testdb.Pool(t, u)
	_, err = pool.Exec(ctx, `UPDATE scheduler_leader SET epoch = 1, instance_id = 'old', since = now()`)
	require.NoError(t, err)

	// An old-epoch fenced transaction that wrote and then hangs (the half-dead leader).
	wrote := make(chan struct{})
	release := make(chan struct{})
	fenced := make(chan error, 1)
	go func() {
		fenced <- oldDB.Fenced(ctx, store.Fence{Epoch: 1}, func(tx *store.Tx) error {
			_, err := tx.Exec(ctx, `INSERT INTO job_settings (job) VALUES ('old-epoch-write')`)
			close(wrote)
			<-release
			return err
		})
	}()
	<-wrote

	newDB, err := store.Open(ctx, u, store.Options{InstanceID: "new", LeaseTimeout: config.LeaseTimeoutDefault})
	require.NoError(t, err)
	defer newDB.Close()
	session, err := newDB.OpenLockSession(ctx)
	require.NoError(t, err)
	defer session.Close()
	require.NoError(t, session.Lock(ctx))

	const lease = 300 * time.Millisecond
	old, cur, terminated, err := session.BumpEpoch(ctx, "new", lease)
	require.NoError(t, err)
	assert.Equal(t, int64(1), old.Epoch)
	assert.Equal(t, "old", old.InstanceID)
	assert.Equal(t, int64(2), cur.Epoch)
	assert.Equal(t, "new", cur.InstanceID)
	assert.NotEmpty(t, terminated)

	close(release)
	assert.Error(t, <-fenced, "the old epoch's transaction must not commit after the bump")
	var n int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM job_settings WHERE job = 'old-epoch-write'`).Scan(&n))
	assert.Zero(t, n)
	row, err := newDB.Leader(ctx)
	require.NoError(t, err)
	assert.Equal(t, cur, row)

	// The bump's own session survived: it still holds the lock and can heartbeat.
	term, err := session.Renew(ctx, cur.Fence(), time.Second)
	require.NoError(t, err)
	assert.Equal(t, cur.Fence(), term)
	require.NoError(t, session.Unlock(ctx))
}

// The bump's since is stamped after the last old-epoch transaction committed, never before:
// it waits for their FOR SHARE locks before taking clock_timestamp().
func TestBumpEpochSinceIsAfterOldEpochCommits(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, _ := testdb.Open(t, store.Options{InstanceID: "x"})
	_, err := db.Pool.Exec(ctx, `UPDATE scheduler_leader SET epoch = 1, instance_id = 'x'`)
	require.NoError(t, err)

	inside := make(chan struct{})
	release := make(chan struct{})
	var committedAt time.Time
	fenced := make(chan error, 1)
	go func() {
		fenced <- db.Fenced(ctx, store.Fence{Epoch: 1}, func(tx *store.Tx) error {
			close(inside)
			<-release
			return tx.QueryRow(ctx, `SELECT clock_timestamp()`).Scan(&committedAt)
		})
	}()
	<-inside
	session, err := db.OpenLockSession(ctx)
	require.NoError(t, err)
	defer session.Close()
	bumped := make(chan store.LeaderRow, 1)
	go func() {
		_, cur, _, err := session.BumpEpoch(ctx, "y", time.Minute)
		assert.NoError(t, err)
		bumped <- cur
	}()
	require.Eventually(t, func() bool {
		var waiting int
		_ = db.Pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock'`).Scan(&waiting)
		return waiting == 1
	}, 10*time.Second, 10*time.Millisecond, "the bump waits for the fenced transaction")
	close(release)
	require.NoError(t, <-fenced)
	cur := <-bumped
	assert.True(t, cur.Since.After(committedAt), "since %s must follow the old epoch's last write %s", cur.Since, committedAt)
}

// Issue 29: a failover with asynchronous replication loses the commits the standby had not
// received, the election of a term among them, and the next election on the promoted
// standby names the same epoch again. The fence compares the whole term identity, so a
// write of the lost term never passes the new term's fence, though its epoch number does.
func TestFenceRefusesALostTermWhoseEpochWasNamedAgain(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, _ := testdb.Open(t, store.Options{InstanceID: "x"})
	elect := func(instance string) store.LeaderRow {
		t.Helper()
		session, err := db.OpenLockSession(ctx)
		require.NoError(t, err)
		defer session.Close()
		_, cur, _, err := session.BumpEpoch(ctx, instance, time.Minute)
		require.NoError(t, err)
		return cur
	}
	first := elect("a")
	lost := elect("b")
	// The rollback: the promoted standby has the row as the first term left it.
	_, err := db.Pool.Exec(ctx, `UPDATE scheduler_leader SET epoch = $1, instance_id = $2, term_id = $3, since = $4
		WHERE id = 1`, first.Epoch, first.InstanceID, first.TermID, first.Since)
	require.NoError(t, err)
	again := elect("c")
	require.Equal(t, lost.Epoch, again.Epoch, "the rollback names the lost term's epoch again")
	require.NotEqual(t, lost.TermID, again.TermID)

	err = db.Fenced(ctx, lost.Fence(), func(tx *store.Tx) error {
		_, err := tx.Exec(ctx, `INSERT INTO job_settings (job) VALUES ('lost-term-write')`)
		return err
	})
	require.ErrorIs(t, err, store.ErrNotLeader, "a write of the lost term must not pass the new term's fence")
	require.NoError(t, db.Fenced(ctx, again.Fence(), func(tx *store.Tx) error {
		_, err := tx.Exec(ctx, `INSERT INTO job_settings (job) VALUES ('new-term-write')`)
		return err
	}))
	row, err := db.Leader(ctx)
	require.NoError(t, err)
	assert.Equal(t, again.Fence(), row.Fence())
}
