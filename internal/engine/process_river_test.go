package engine

import (
	"context"
	"encoding/json"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schedulerhq/scheduler/internal/store"
	"github.com/schedulerhq/scheduler/internal/testdb"
	"github.com/schedulerhq/scheduler/internal/testpace"
)

// reportArgs is the team's River job args for the kind the scheduler inserts.
type reportArgs struct {
	Report string `json:"report"`
}

func (reportArgs) Kind() string { return "build_report" }

// riverWorked is what a real River client working the target's queue saw: each job's id
// and metadata, as many times as it was worked.
type riverWorked struct {
	mu   sync.Mutex
	jobs map[int64]int
	keys map[string][]int64 // scheduler_key → River job ids
	slot map[string]string  // scheduler_key → scheduler_slot
}

// startRiverWorker runs a River client with a worker for build_report on the reports queue
// of the database at u, until the test ends.
func startRiverWorker(t *testing.T, pool *pgxpool.Pool) *riverWorked {
	t.Helper()
	w := &riverWorked{jobs: map[int64]int{}, keys: map[string][]int64{}, slot: map[string]string{}}
	workers := river.NewWorkers()
	river.AddWorker(workers, river.WorkFunc(func(ctx context.Context, job *river.Job[reportArgs]) error {
		var meta struct {
			Key  string `json:"scheduler_key"`
			Slot string `json:"scheduler_slot"`
		}
		if err := json.Unmarshal(job.Metadata, &meta); err != nil {
			return err
		}
		w.mu.Lock()
		defer w.mu.Unlock()
		w.jobs[job.ID]++
		w.keys[meta.Key] = append(w.keys[meta.Key], job.ID)
		w.slot[meta.Key] = meta.Slot
		return nil
	}))
	client, err := river.NewClient(riverpgxv5.New(pool), &river.Config{
		Queues:  map[string]river.QueueConfig{"reports": {MaxWorkers: 4}},
		Workers: workers, FetchPollInterval: 50 * time.Millisecond, FetchCooldown: 10 * time.Millisecond,
	})
	require.NoError(t, err)
	require.NoError(t, client.Start(context.Background()))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = client.Stop(ctx)
	})
	return w
}

// A river job every second, through two SIGKILLs of the leader among three real processes,
// each landing while a slot's insert is in flight (a trigger on river_job holds the
// insert's transaction open for 300 ms): every slot from the first to the last ends with one
// row; each slot that succeeded has exactly one River job, with its key and slot in the
// job's metadata; no key has two River jobs; and a real River worker worked each job once.
func TestRiverJobOncePerSlotThroughLeaderKills(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real processes")
	}
	bin := buildScheduler(t, t.TempDir())
	db, url := testdb.Open(t, store.Options{InstanceID: "test"})
	ctx := context.Background()
	appURL := testdb.New(t)
	testdb.MigrateRiver(t, appURL)
	app := testdb.Pool(t, appURL)
	_, err := app.Exec(ctx, `
		CREATE FUNCTION slow_insert() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN PERFORM pg_sleep(0.3); RETURN NULL; END $$;
		CREATE TRIGGER slow_insert AFTER INSERT ON river_job FOR EACH ROW EXECUTE FUNCTION slow_insert()`)
	require.NoError(t, err)
	login, loginURL := testdb.Login(t, appURL, testdb.RiverGrants...)
	initMarkers(t, appURL, login)
	worked := startRiverWorker(t, app)

	createDefinition(t, db, `{"name": "report-every-second", "schedule": "@every 1s", "timeout": "10s",
		"river": {"target": "APP", "kind": "build_report", "queue": "reports", "args": {"report": "daily"}}}`)
	env := []string{"SCHEDULER_SQL_TARGET_APP=" + loginURL, "SCHEDULER_JOB_ROUNDS_CLOSE_ENABLED=false"}
	procs := map[string]*process{}
	for _, id := range []string{"rv-a", "rv-b", "rv-c"} {
		procs[id] = startProcessIn(t, "", bin, url, id, env...)
	}
	epoch := int64(0)
	for kill := 0; kill < 2; kill++ {
		l := awaitLeader(t, db, procs, epoch)
		epoch = l.Epoch
		awaitJobSuccesses(t, db, "report-every-second", epoch, 3)
		awaitInsertInFlight(t, app, l.InstanceID)
		p := procs[l.InstanceID]
		require.NoError(t, p.cmd.Process.Signal(syscall.SIGKILL))
		_ = p.cmd.Wait()
	}
	l := awaitLeader(t, db, procs, epoch)
	awaitJobSuccesses(t, db, "report-every-second", l.Epoch, 3)
	for _, p := range procs {
		if p.cmd.ProcessState == nil {
			require.NoError(t, p.cmd.Process.Signal(syscall.SIGTERM))
			_ = p.cmd.Wait()
		}
	}

	assert.Zero(t, count(t, db, `
		SELECT count(*) FROM generate_series(
			(SELECT min(scheduled_at) FROM job_runs WHERE job = $1),
			(SELECT max(scheduled_at) FROM job_runs WHERE job = $1), interval '1 second') AS s
		WHERE NOT EXISTS (SELECT 1 FROM job_runs WHERE job = $1 AND scheduled_at = s)`, "report-every-second"),
		"slots without a row")
	assert.Positive(t, count(t, db, `SELECT count(*) FROM job_runs WHERE job = 'report-every-second' AND trigger = 'recovery'`),
		"a kill left an insert in flight, whose slot a recovery run took up")

	// The slots whose work was done: a succeeded run, or an abandoned one whose recovery
	// succeeded, each once.
	rows, err := db.Pool.Query(ctx, `
		SELECT to_char(coalesce(r.scheduled_at, o.scheduled_at) AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"')
		FROM job_runs r LEFT JOIN job_runs o ON o.id = r.recovers_run_id
		WHERE r.job = 'report-every-second' AND r.status = 'succeeded'`)
	require.NoError(t, err)
	done := map[string]bool{}
	for rows.Next() {
		var s string
		require.NoError(t, rows.Scan(&s))
		assert.False(t, done[s], "slot %s succeeded twice", s)
		done[s] = true
	}
	require.NoError(t, rows.Err())
	require.GreaterOrEqual(t, len(done), 9, "the river job ran")

	var inserted int
	require.NoError(t, app.QueryRow(ctx, `SELECT count(*) FROM river_job`).Scan(&inserted))
	var dupKeys int
	require.NoError(t, app.QueryRow(ctx, `SELECT count(*) FROM (SELECT metadata->>'scheduler_key' FROM river_job
		GROUP BY 1 HAVING count(*) > 1) d`).Scan(&dupKeys))
	assert.Zero(t, dupKeys, "a slot's key on two River jobs")
	assert.Equal(t, len(done), inserted, "one River job for each slot recorded succeeded, and none other")

	require.Eventually(t, func() bool {
		worked.mu.Lock()
		defer worked.mu.Unlock()
		return len(worked.jobs) == inserted
	}, waitTimeout, 20*time.Millisecond, "the River worker works every inserted job")
	worked.mu.Lock()
	defer worked.mu.Unlock()
	slots := map[string]bool{}
	for key, ids := range worked.keys {
		assert.Len(t, ids, 1, "key %s reached the worker in River jobs %v", key, ids)
		assert.NotEmpty(t, key)
		slots[worked.slot[key]] = true
	}
	for id, n := range worked.jobs {
		assert.Equal(t, 1, n, "River job %d worked %d times", id, n)
	}
	assert.Equal(t, done, slots, "the worker got exactly the slots recorded succeeded")
}

// awaitJobSuccesses waits until job succeeded n times under epoch.
func awaitJobSuccesses(t *testing.T, db *testdb.DB, job string, epoch int64, n int) {
	t.Helper()
	require.Eventually(t, func() bool {
		var got int
		err := db.Pool.QueryRow(context.Background(), `SELECT count(*) FROM job_runs
			WHERE job = $1 AND epoch = $2 AND status = 'succeeded'`, job, epoch).Scan(&got)
		return err == nil && got >= n
	}, testpace.Scaled(60*time.Second), 20*time.Millisecond, "%s to succeed %d times under epoch %d", job, n, epoch)
}

// awaitInsertInFlight waits until a run of instance holds an open River insert in the
// target: its session inside the slow trigger.
func awaitInsertInFlight(t *testing.T, app *pgxpool.Pool, instance string) {
	t.Helper()
	require.Eventually(t, func() bool {
		var n int
		err := app.QueryRow(context.Background(), `SELECT count(*) FROM pg_stat_activity
			WHERE application_name LIKE $1 AND state = 'active' AND query ILIKE '%river_job%'`,
			"scheduler-job:"+instance+":%").Scan(&n)
		return err == nil && n > 0
	}, waitTimeout, 5*time.Millisecond, "a River insert of %s in flight", instance)
}
