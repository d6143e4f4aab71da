package store_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schedulerhq/scheduler/internal/store"
	"github.com/schedulerhq/scheduler/internal/testdb"
)

func TestMain(m *testing.M) { testdb.Main(m) }

func TestMigrationsRoundTrip(t *testing.T) {
	t.Parallel()
	u := testdb.Empty(t)
	mg, err := store.NewMigrator(u)
	require.NoError(t, err)
	defer mg.Close()

	require.NoError(t, mg.Up())
	v, dirty, err := mg.Version()
	require.NoError(t, err)
	assert.Equal(t, store.SchemaVersion(), v)
	assert.False(t, dirty)

	require.NoError(t, mg.Down(0))
	v, _, err = mg.Version()
	require.NoError(t, err)
	assert.Zero(t, v)
	assert.Equal(t, []string{"schema_migrations"}, tables(t, u), "down must remove every table it created")

	require.NoError(t, mg.Up())
	v, _, err = mg.Version()
	require.NoError(t, err)
	assert.Equal(t, store.SchemaVersion(), v)
}

func TestConcurrentMigrationsApplyOnce(t *testing.T) {
	t.Parallel()
	u := testdb.Empty(t)
	var wg sync.WaitGroup
	errs := make([]error, 3)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			mg, err := store.NewMigrator(u)
			if err != nil {
				errs[i] = err
				return
			}
			defer mg.Close()
			errs[i] = mg.Up()
		}()
	}
	wg.Wait()
	for i, err := range errs {
		require.NoError(t, err, "migrator %d", i)
	}
	mg, err := store.NewMigrator(u)
	require.NoError(t, err)
	defer mg.Close()
	v, dirty, err := mg.Version()
	require.NoError(t, err)
	assert.Equal(t, store.SchemaVersion(), v)
	assert.False(t, dirty)
}

func TestEachTestGetsItsOwnDatabase(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	a, _ := testdb.Open(t, store.Options{})
	b, _ := testdb.Open(t, store.Options{})
	_, err := a.Pool.Exec(ctx, `INSERT INTO job_settings (job, paused) VALUES ('isolation-probe', true)`)
	require.NoError(t, err)
	var n int
	require.NoError(t, b.Pool.QueryRow(ctx, `SELECT count(*) FROM job_settings WHERE job = 'isolation-probe'`).Scan(&n))
	assert.Zero(t, n, "a row written in one test database is visible in another")
	require.NoError(t, a.Pool.QueryRow(ctx, `SELECT count(*) FROM job_settings WHERE job = 'isolation-probe'`).Scan(&n))
	assert.Equal(t, 1, n)
}

func TestConnectionsCarrySessionSettings(t *testing.T) {
	t.Parallel()
	db, _ := testdb.Open(t, store.Options{InstanceID: "replica-7", LeaseTimeout: 3e9})
	var app, userTimeout, idleTx string
	// On the store's own pool, not the test's.
	require.NoError(t, db.ReadOnly().QueryRow(context.Background(),
		`SELECT current_setting('application_name'), current_setting('tcp_user_timeout'),
		        current_setting('idle_in_transaction_session_timeout')`).Scan(&app, &userTimeout, &idleTx))
	assert.Equal(t, "scheduler:replica-7", app)
	assert.Equal(t, "3s", idleTx)
	// tcp_user_timeout reads 0 on a Unix socket; over TCP it is the lease in ms.
	assert.Contains(t, []string{"3000", "3s"}, userTimeout)
}

func TestFencedRefusesStaleEpoch(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, _ := testdb.Open(t, store.Options{})
	_, err := db.Pool.Exec(ctx, `UPDATE scheduler_leader SET epoch = 2`)
	require.NoError(t, err)

	write := func(epoch int64) error {
		return db.Fenced(ctx, store.Fence{Epoch: epoch}, func(tx *store.Tx) error {
			_, err := tx.Exec(ctx, `INSERT INTO job_settings (job) VALUES ($1)`, fmt.Sprintf("fence-%d", epoch))
			return err
		})
	}
	require.NoError(t, write(2))
	err = write(1)
	require.Error(t, err)
	assert.True(t, errors.Is(err, store.ErrNotLeader), "got %v", err)

	var jobs []string
	rows, err := db.Pool.Query(ctx, `SELECT job FROM job_settings ORDER BY job`)
	require.NoError(t, err)
	jobs, err = pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	assert.Equal(t, []string{"fence-2"}, jobs, "only the current epoch's write may commit")
}

func TestEpochBumpWaitsForFencedTransaction(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, _ := testdb.Open(t, store.Options{})
	_, err := db.Pool.Exec(ctx, `UPDATE scheduler_leader SET epoch = 1`)
	require.NoError(t, err)

	inside := make(chan struct{})
	release := make(chan struct{})
	var releaseOnce sync.Once
	t.Cleanup(func() { releaseOnce.Do(func() { close(release) }) }) // a failure must not leave it open
	fenced := make(chan error, 1)
	go func() {
		fenced <- db.Fenced(ctx, store.Fence{Epoch: 1}, func(tx *store.Tx) error {
			close(inside)
			<-release
			_, err := tx.Exec(ctx, `INSERT INTO job_settings (job) VALUES ('old-epoch-write')`)
			return err
		})
	}()
	<-inside

	// The holder's renewal (an UPDATE of renewed_at alone) does not wait for the term's own
	// transactions: they hold the row FOR KEY SHARE.
	renewCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	_, err = db.Pool.Exec(renewCtx, `UPDATE scheduler_leader SET renewed_at = clock_timestamp() WHERE epoch = 1`)
	require.NoError(t, err, "the renewal must not wait for the term's transactions")

	// An election locks the row FOR UPDATE before it bumps the epoch (bumpTerm).
	bumped := make(chan error, 1)
	go func() {
		bumped <- pgx.BeginFunc(ctx, db.Pool, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, `SELECT 1 FROM scheduler_leader WHERE id = 1 FOR UPDATE`); err != nil {
				return err
			}
			_, err := tx.Exec(ctx, `UPDATE scheduler_leader SET epoch = epoch + 1, since = clock_timestamp()`)
			return err
		})
	}()
	// The bump must be blocked by the fenced transaction's share lock: wait until
	// PostgreSQL reports it waiting on a lock, then let the old transaction finish.
	require.Eventually(t, func() bool {
		var waiting int
		_ = db.Pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE 'SELECT 1 FROM scheduler_leader%'`).Scan(&waiting)
		return waiting == 1
	}, 10e9, 10e6)
	select {
	case err := <-bumped:
		t.Fatalf("epoch bump finished while an old-epoch transaction was open: %v", err)
	default:
	}
	releaseOnce.Do(func() { close(release) })
	require.NoError(t, <-fenced)
	require.NoError(t, <-bumped)
}

func tables(t *testing.T, u string) []string {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, u)
	require.NoError(t, err)
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, `SELECT tablename FROM pg_tables WHERE schemaname = 'public' ORDER BY 1`)
	require.NoError(t, err)
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	return names
}

// Two deployments sharing a webhook receiver must not send the same Idempotency-Key for
// different messages: each migrated database draws its own deployment id.
func TestEachMigratedDatabaseNamesItsOwnDeployment(t *testing.T) {
	t.Parallel()
	ids := map[string]bool{}
	for range 2 {
		u := testdb.Empty(t)
		mg, err := store.NewMigrator(u)
		require.NoError(t, err)
		require.NoError(t, mg.Up())
		mg.Close()
		var id string
		require.NoError(t, testdb.Pool(t, u).QueryRow(context.Background(),
			`SELECT deployment_id::text FROM scheduler_identity`).Scan(&id))
		assert.Len(t, id, 36, "a UUID")
		ids[id] = true
	}
	assert.Len(t, ids, 2, "two databases, two deployment ids")
}

// openAsLeader opens a test database whose leader row is at epoch 1, as a leader's fenced
// transactions expect, and returns it with its clock cut to the second.
func openAsLeader(t *testing.T) (*testdb.DB, time.Time) {
	t.Helper()
	db, _ := testdb.Open(t, store.Options{})
	ctx := context.Background()
	_, err := db.Pool.Exec(ctx, `UPDATE scheduler_leader SET epoch = 1`)
	require.NoError(t, err)
	var now time.Time
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT date_trunc('second', now())`).Scan(&now))
	return db, now
}
