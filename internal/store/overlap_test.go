package store_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schedulerhq/scheduler/internal/store"
	"github.com/schedulerhq/scheduler/internal/store/storetest"
	"github.com/schedulerhq/scheduler/internal/testdb"
)

// defineAllow stores a runtime job with overlap allow and max_concurrent n (or another
// overlap when n is 0), as the API would.
func defineOverlap(t *testing.T, db *testdb.DB, name, overlap string, n int) {
	t.Helper()
	def := `{"name": "` + name + `", "schedule": "@every 1s", "overlap": "` + overlap + `", "http": {"url": "http://x.example"}}`
	if n > 0 {
		def = `{"name": "` + name + `", "schedule": "@every 1s", "overlap": "allow", "max_concurrent": ` +
			string(rune('0'+n)) + `, "http": {"url": "http://x.example"}}`
	}
	_, err := db.CreateDefinition(context.Background(), name, "http", []byte(def), 100)
	require.NoError(t, err)
}

// activeRuns counts a job's queued and running runs.
func activeRuns(t *testing.T, db *testdb.DB, job string) int {
	t.Helper()
	var n int
	require.NoError(t, db.Pool.QueryRow(context.Background(),
		`SELECT count(*) FROM job_runs WHERE job = $1 AND status IN ('queued', 'running')`, job).Scan(&n))
	return n
}

// isBoundViolation reports the error of job_runs_active_bound.
func isBoundViolation(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "23514" && pgErr.ConstraintName == "job_runs_active_bound"
}

// The attack: a login that writes job_runs directly, without the scheduler's lock or checks.
// The database itself refuses a job's active run past its bound: a fourth running row of an
// allow job with max_concurrent 3, a second one of a built-in job even in another day's
// partition, a finished run made running again, a bulk insert of many jobs.
func TestDatabaseRefusesActiveRunsPastTheBound(t *testing.T) {
	t.Parallel()
	db, _ := testdb.Open(t, store.Options{})
	ctx := context.Background()
	defineOverlap(t, db, "fan", "", 3)
	// One instant for every slot: with the clock read at each insert, two inserts a second
	// apart in ago but straddling a second's turn named the same slot, and the second failed
	// on the slot's unique key instead of the bound (1 run in 100).
	now := time.Now()
	insert := func(job string, ago time.Duration) error {
		_, err := storetest.InsertRuns(ctx, db.Pool, storetest.RunOpts{Job: job, Status: store.StatusRunning,
			ScheduledAt: now.Truncate(time.Second).Add(-ago), StartedAt: now})
		return err
	}
	for i, at := range []time.Duration{3 * time.Second, 2 * time.Second, time.Second} {
		require.NoError(t, insert("fan", at), "run %d of 3", i+1)
	}
	err := insert("fan", 0)
	require.True(t, isBoundViolation(err), "a fourth running run: %v", err)
	_, err = storetest.InsertRuns(ctx, db.Pool, storetest.RunOpts{Job: "fan", Status: store.StatusQueued})
	require.True(t, isBoundViolation(err), "a fourth, queued: %v", err)
	assert.Equal(t, 3, activeRuns(t, db, "fan"))

	// A built-in job (no definition) has one: yesterday's slot and today's manual run are in
	// two partitions, which no unique index spans.
	require.NoError(t, insert("plan-change", 24*time.Hour))
	_, err = storetest.InsertRuns(ctx, db.Pool, storetest.RunOpts{Job: "plan-change", Status: store.StatusQueued})
	require.True(t, isBoundViolation(err), "a second active run of a built-in job: %v", err)

	// A finished run made running again.
	storetest.Run(ctx, t, db.Pool, storetest.RunOpts{Job: "plan-change", Status: store.StatusSucceeded, FinishedAt: time.Now()})
	_, err = db.Pool.Exec(ctx, `UPDATE job_runs SET status = 'running', finished_at = NULL WHERE job = 'plan-change' AND status = 'succeeded'`)
	require.True(t, isBoundViolation(err), "a finished run revived: %v", err)

	// A statement of many rows (the hashed check): 100 jobs once each pass, one job twice fails.
	queued := func(prefix string, is ...int) (runs []storetest.RunOpts) {
		for _, i := range is {
			runs = append(runs, storetest.RunOpts{Job: fmt.Sprintf("%s-%d", prefix, i), Status: store.StatusQueued})
		}
		return runs
	}
	hundred := make([]int, 100)
	for i := range hundred {
		hundred[i] = i + 1
	}
	storetest.Runs(ctx, t, db.Pool, queued("bulk", hundred...)...)
	_, err = storetest.InsertRuns(ctx, db.Pool, queued("other", append(hundred, 7)...)...)
	require.True(t, isBoundViolation(err), "a bulk insert with two runs of one job: %v", err)
	// In a statement of many rows, a job of max_concurrent 3 takes three, not a fourth, and
	// its runs written into a partition not its definition's still count against it there.
	defineOverlap(t, db, "wide", "", 3)
	wide := func(n, partition int) []storetest.RunOpts {
		runs := queued("filler", hundred...)
		for range n {
			runs = append(runs, storetest.RunOpts{Job: "wide", Status: store.StatusQueued, Partition: partition})
		}
		return runs
	}
	_, err = storetest.InsertRuns(ctx, db.Pool, wide(4, 0)...)
	require.True(t, isBoundViolation(err), "four runs of a job of three in one statement: %v", err)
	storetest.Runs(ctx, t, db.Pool, wide(3, 0)...)
	_, err = storetest.InsertRuns(ctx, db.Pool, append(queued("filler2", hundred...),
		storetest.RunOpts{Job: "wide", Status: store.StatusQueued, Partition: 5})...)
	require.True(t, isBoundViolation(err), "a fourth, written into another partition: %v", err)

	// A skip, queue-one or replace job has one, whatever a stray max_concurrent says.
	storetest.Definition(ctx, t, db.Pool, storetest.DefinitionOpts{Name: "sneaky",
		Definition: json.RawMessage(`{"overlap": "replace", "max_concurrent": 5}`)})
	require.NoError(t, insert("sneaky", time.Second))
	require.True(t, isBoundViolation(insert("sneaky", 2*time.Second)))
}

// Concurrent writers, of every kind at once and several times over: hostile direct inserts
// that take no lock, the API's manual triggers, and a leader's claims. None passes the
// bound: at the end, and at every instant a sampler looked, at most three runs are active.
func TestConcurrentWritersCannotPassTheBound(t *testing.T) {
	t.Parallel()
	db, _ := testdb.Open(t, store.Options{})
	ctx := context.Background()
	_, err := db.Pool.Exec(ctx, `UPDATE scheduler_leader SET epoch = 2`)
	require.NoError(t, err)
	defineOverlap(t, db, "fan", "", 3)
	var base time.Time
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT date_trunc('second', now()) - interval '1 hour'`).Scan(&base))
	for round := range 5 {
		start := make(chan struct{})
		var wg sync.WaitGroup
		for w := range 8 {
			wg.Go(func() {
				<-start
				switch w % 4 {
				case 0: // direct
					_, _ = storetest.InsertRuns(ctx, db.Pool, storetest.RunOpts{Job: "fan", Status: store.StatusRunning})
				case 1: // the API
					_, _, err := db.QueueManualRun(ctx, "fan", nil, []byte(`{}`))
					assert.NoError(t, err)
				case 2: // the leader
					slot := base.Add(time.Duration(round*8+w) * time.Second)
					assert.NoError(t, db.Fenced(ctx, store.Fence{Epoch: 2}, func(tx *store.Tx) error {
						_, err := tx.ClaimSlot(ctx, store.Claim{Job: "fan", ScheduledAt: slot, Trigger: store.TriggerCatchUp, InstanceID: "a"})
						return err
					}))
				case 3: // a deposed leader of epoch 1: the fence refuses it
					err := db.Fenced(ctx, store.Fence{Epoch: 1}, func(tx *store.Tx) error {
						_, err := tx.ClaimSlot(ctx, store.Claim{Job: "fan", ScheduledAt: base, Trigger: store.TriggerCatchUp, InstanceID: "old"})
						return err
					})
					assert.ErrorIs(t, err, store.ErrNotLeader)
				}
			})
		}
		close(start)
		for range 20 {
			assert.LessOrEqual(t, activeRuns(t, db, "fan"), 3)
		}
		wg.Wait()
		assert.Equal(t, 3, activeRuns(t, db, "fan"), "round %d fills the bound, no more", round)
		_, err := db.Pool.Exec(ctx, `UPDATE job_runs SET status = 'succeeded', finished_at = now() WHERE job = 'fan' AND status IN ('queued', 'running')`)
		require.NoError(t, err)
	}
}
