package targets

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schedulerhq/scheduler/internal/testdb"
	"github.com/schedulerhq/scheduler/internal/tracing/tracingtest"
)

// invoiceArgs is what a team's River worker declares for the kind the scheduler inserts.
type invoiceArgs struct {
	CustomerID int `json:"customer_id"`
}

func (invoiceArgs) Kind() string { return "send_invoice" }

// riverFixture is a target database with River's schema, a login that may insert River jobs
// and nothing of the scheduler's, and its target.
type riverFixture struct {
	*sqlFixture
}

func newRiverFixture(t *testing.T) *riverFixture {
	t.Helper()
	u := testdb.New(t)
	testdb.MigrateRiver(t, u)
	f := &sqlFixture{url: u, admin: testdb.Pool(t, u)}
	var loginURL string
	f.login, loginURL = testdb.Login(t, u, testdb.RiverGrants...)
	conn, err := pgx.Connect(sqlTestCtx(t), u)
	require.NoError(t, err)
	defer conn.Close(context.Background())
	require.NoError(t, InitMarkers(sqlTestCtx(t), conn, f.login))
	f.target = newTestTarget(t, "APP", loginURL)
	return &riverFixture{f}
}

func riverRun(key string, slot time.Time, unique bool) SQLRun {
	return SQLRun{Key: key, Job: "billing/invoices", RunID: 7, ScheduledAt: slot, Timeout: 30 * time.Second,
		River: &RiverJob{Kind: "send_invoice", Args: json.RawMessage(`{"customer_id":42}`), Queue: "billing", Unique: unique}}
}

// startWorker runs a real River client on the target's billing queue, as the team would,
// and returns the metadata of each job it worked, in order.
func (f *riverFixture) startWorker(t *testing.T) <-chan map[string]any {
	t.Helper()
	workers := river.NewWorkers()
	worked := make(chan map[string]any, 100)
	river.AddWorker(workers, river.WorkFunc(func(ctx context.Context, job *river.Job[invoiceArgs]) error {
		if job.Args.CustomerID != 42 {
			return fmt.Errorf("args arrived as %+v", job.Args)
		}
		var meta map[string]any
		if err := json.Unmarshal(job.Metadata, &meta); err != nil {
			return err
		}
		worked <- meta
		return nil
	}))
	client, err := river.NewClient(riverpgxv5.New(f.admin), &river.Config{
		Queues:  map[string]river.QueueConfig{"billing": {MaxWorkers: 2}},
		Workers: workers, FetchPollInterval: 50 * time.Millisecond, FetchCooldown: 10 * time.Millisecond,
	})
	require.NoError(t, err)
	require.NoError(t, client.Start(context.Background()))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = client.Stop(ctx)
	})
	return worked
}

func awaitWorked(t *testing.T, worked <-chan map[string]any) map[string]any {
	t.Helper()
	select {
	case meta := <-worked:
		return meta
	case <-time.After(30 * time.Second):
		t.Fatal("the River worker got no job")
		return nil
	}
}

// A slot's run inserts one River job, with the slot in its metadata, that a River worker
// works; a second run of the slot (a retry, a recovery) finds the marker and inserts none.
func TestRiverRunInsertsOneJobPerSlot(t *testing.T) {
	f := newRiverFixture(t)
	ctx := sqlTestCtx(t)
	worked := f.startWorker(t)
	slot := time.Date(2026, 11, 26, 2, 0, 0, 0, time.UTC)
	res, err := f.target.Run(ctx, riverRun("slot-1", slot, false))
	require.NoError(t, err)
	require.NotZero(t, res.River.JobID)
	assert.False(t, res.River.Duplicate)

	meta := awaitWorked(t, worked)
	assert.Equal(t, map[string]any{"scheduler_key": "slot-1", "scheduler_job": "billing/invoices",
		"scheduler_slot": "2026-11-26T02:00:00Z", "scheduler_run_id": float64(7)}, meta)

	again := riverRun("slot-1", slot, false)
	again.RunID = 8
	res, err = f.target.Run(ctx, again)
	require.NoError(t, err)
	assert.Equal(t, int64(7), res.AppliedBy, "the second run finds the first's marker")
	assert.Equal(t, 1, f.count(t, `SELECT count(*) FROM river_job`), "and inserts no second job")
	assert.Equal(t, 1, f.count(t, `SELECT count(*) FROM river_job WHERE kind = 'send_invoice' AND queue = 'billing'
		AND metadata->>'scheduler_key' = 'slot-1'`))
}

// Runs of one slot at once (a recovery beside a run a dead leader left going) insert one job.
func TestRiverConcurrentRunsOfOneSlotInsertOnce(t *testing.T) {
	f := newRiverFixture(t)
	ctx := sqlTestCtx(t)
	for round := range 5 {
		key := fmt.Sprintf("slot-%d", round)
		var wg sync.WaitGroup
		for i := range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				r := riverRun(key, time.Date(2026, 11, 26, 2, round, 0, 0, time.UTC), false)
				r.RunID = int64(100*round + i + 1)
				_, err := f.target.Run(ctx, r)
				assert.NoError(t, err)
			}()
		}
		wg.Wait()
		assert.Equal(t, 1, f.count(t, `SELECT count(*) FROM river_job WHERE metadata->>'scheduler_key' = $1`, key), "slot %s", key)
	}
}

// unique: while a job of the same kind, args and queue waits, a later slot inserts none and
// says which job it found; its marker still commits, so the slot is done.
func TestRiverUniqueSlotInsertsNoSecondWaitingJob(t *testing.T) {
	f := newRiverFixture(t)
	ctx := sqlTestCtx(t)
	first, err := f.target.Run(ctx, riverRun("slot-1", time.Date(2026, 11, 26, 2, 0, 0, 0, time.UTC), true))
	require.NoError(t, err)
	second, err := f.target.Run(ctx, riverRun("slot-2", time.Date(2026, 11, 26, 2, 1, 0, 0, time.UTC), true))
	require.NoError(t, err)
	assert.True(t, second.River.Duplicate)
	assert.Equal(t, first.River.JobID, second.River.JobID)
	assert.Equal(t, 1, f.count(t, `SELECT count(*) FROM river_job`))
	assert.Equal(t, 1, f.count(t, `SELECT count(*) FROM `+f.target.markers+` WHERE key = 'slot-2'`), "the slot is done")

	// Once the waiting job is worked, the next slot inserts again.
	f.exec(t, `UPDATE river_job SET state = 'completed', finalized_at = now()`)
	third, err := f.target.Run(ctx, riverRun("slot-3", time.Date(2026, 11, 26, 2, 2, 0, 0, time.UTC), true))
	require.NoError(t, err)
	assert.False(t, third.River.Duplicate)
	assert.Equal(t, 2, f.count(t, `SELECT count(*) FROM river_job`))
}

// A target without River's tables fails the run with what to do, and commits no marker, so
// the slot runs once River is there.
func TestRiverRunWithoutRiverSchemaSaysWhatToDo(t *testing.T) {
	f := newSQLFixture(t)
	_, err := f.target.Run(sqlTestCtx(t), riverRun("slot-1", time.Date(2026, 11, 26, 2, 0, 0, 0, time.UTC), false))
	require.ErrorContains(t, err, "no River tables")
	require.ErrorContains(t, err, "migrate-up")
	assert.Zero(t, f.count(t, `SELECT count(*) FROM `+f.target.markers))
}

// The attack of a team that owns the River table its job inserts into: a trigger on
// river_job that changes the job's login (its password here), so that the next run finds it
// changed. The insert's transaction is checked as a SQL job's statements are: the run fails,
// and neither the job, the change nor the marker commits.
func TestRiverInsertThatChangesTheLoginCommitsNothing(t *testing.T) {
	f := newRiverFixture(t)
	f.exec(t, `CREATE FUNCTION hostile_insert() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN EXECUTE 'ALTER ROLE ' || quote_ident(current_user) || ' SET lock_timeout = 0'; RETURN NULL; END $$`)
	f.exec(t, `CREATE TRIGGER hostile_insert AFTER INSERT ON river_job FOR EACH ROW EXECUTE FUNCTION hostile_insert()`)
	_, err := f.target.Run(sqlTestCtx(t), riverRun("slot-1", time.Date(2026, 11, 26, 2, 0, 0, 0, time.UTC), false))
	require.ErrorContains(t, err, "changed a role")
	assert.Zero(t, f.count(t, `SELECT count(*) FROM river_job`))
	assert.Zero(t, f.count(t, `SELECT count(*) FROM `+f.target.markers))
	assert.Zero(t, f.count(t, `SELECT count(*) FROM pg_db_role_setting s JOIN pg_roles r ON r.oid = s.setrole WHERE r.rolname = $1`, f.login))
}

// A traced River insert is the run's SQL span, naming the River job it inserted.
func TestRiverInsertIsASpanNamingTheJob(t *testing.T) {
	tr, receiver := startTracing(t)
	f := newRiverFixture(t)
	ctx, run := tr.Tracer().Start(sqlTestCtx(t), "test.run")
	res, err := f.target.Run(ctx, riverRun("slot-1", time.Date(2026, 11, 26, 2, 0, 0, 0, time.UTC), false))
	require.NoError(t, err)
	run.End()
	require.NoError(t, tr.Shutdown(context.Background()))
	spans := receiver.Await(t, 5*time.Second, "the insert's span", func(s []tracingtest.Span) bool { return len(s) >= 2 })
	var sql *tracingtest.Span
	for i := range spans {
		if spans[i].Name == "scheduler.sql" {
			sql = &spans[i]
		}
	}
	require.NotNil(t, sql)
	assert.Equal(t, strconv.FormatInt(res.River.JobID, 10), sql.Attrs["scheduler.river.job_id"])
	assert.Equal(t, "false", sql.Attrs["scheduler.river.duplicate"])
	assert.NotContains(t, fmt.Sprint(sql.Attrs), "customer_id", "a River job's args are the team's, not the trace's")
}
