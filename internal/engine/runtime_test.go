package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schedulerhq/scheduler/internal/runtimejob"
	"github.com/schedulerhq/scheduler/internal/secrets"
	"github.com/schedulerhq/scheduler/internal/store"
	"github.com/schedulerhq/scheduler/internal/targets"
	"github.com/schedulerhq/scheduler/internal/testdb"
)

// createDefinition stores a runtime job as the API does after its checks, and returns its
// version.
func createDefinition(t *testing.T, db *testdb.DB, js string) int64 {
	t.Helper()
	j := checkDefinition(t, js)
	b, err := json.Marshal(j.Def)
	require.NoError(t, err)
	sd, err := db.CreateDefinition(context.Background(), j.Def.Name, j.Def.Kind(), b, 10_000)
	require.NoError(t, err)
	return sd.Version
}

func replaceDefinition(t *testing.T, db *testdb.DB, js string) int64 {
	t.Helper()
	j := checkDefinition(t, js)
	b, err := json.Marshal(j.Def)
	require.NoError(t, err)
	_, after, err := db.ReplaceDefinition(context.Background(), j.Def.Name, j.Def.Kind(), b, 0)
	require.NoError(t, err)
	return after.Version
}

func checkDefinition(t *testing.T, js string) *runtimejob.Checked {
	t.Helper()
	d, err := runtimejob.Decode([]byte(js))
	require.NoError(t, err)
	j, errs := runtimejob.Check(d, runtimejob.Env{})
	require.Empty(t, errs)
	return j
}

// runtimeFor is a Runtime whose calls may reach the loopback test servers.
func runtimeFor(t *testing.T, allow ...string) *runtimejob.Runtime {
	t.Helper()
	g, err := targets.NewGuard(allow)
	require.NoError(t, err)
	return &runtimejob.Runtime{Caller: targets.NewCaller(targets.Config{Guard: g})}
}

// A definition change takes effect on the leader within a second of its commit, without a
// restart: the next slots follow the new schedule, and no slot runs twice.
func TestDefinitionChangeTakesEffectWithinASecond(t *testing.T) {
	db, url := newDB(t)
	var calls atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { calls.Add(1) }))
	t.Cleanup(srv.Close)
	// A poll far slower than the promise: only the notification can meet it.
	n := startNode(t, url, "a", nodeOptions{runtime: runtimeFor(t, "127.0.0.1/32"), pollInterval: time.Minute})
	awaitSignal(t, &n.en.testSignals.leading, "leading")

	createDefinition(t, db, `{"name": "hook", "schedule": "0 0 1 1 *", "http": {"url": "`+srv.URL+`"}}`)
	assert.Equal(t, "hook@1", awaitSignal(t, &n.en.testSignals.definitionLoaded, "version 1 loaded"))

	committed := time.Now()
	v := replaceDefinition(t, db, `{"name": "hook", "schedule": "@every 1s", "http": {"url": "`+srv.URL+`"}}`)
	assert.Equal(t, "hook@2", awaitSignal(t, &n.en.testSignals.definitionLoaded, "version 2 loaded"))
	assert.Less(t, time.Since(committed), time.Second, "the change took effect within a second of its commit")
	require.Equal(t, int64(2), v)

	require.Eventually(t, func() bool {
		return count(t, db, `SELECT count(*) FROM job_runs WHERE job = 'hook' AND status = 'succeeded'`) >= 3
	}, waitTimeout, 20*time.Millisecond, "the new schedule's slots run")
	assert.Zero(t, count(t, db, `SELECT count(*) FROM job_runs WHERE job = 'hook' AND definition_version IS DISTINCT FROM 2`),
		"every run records the version it followed")
	assert.GreaterOrEqual(t, calls.Load(), int64(3))

	// Deleting the job stops its timer; its history stays.
	_, err := db.DeleteDefinition(context.Background(), "hook", 0)
	require.NoError(t, err)
	require.Eventually(t, func() bool { return n.en.entry("hook") == nil }, waitTimeout, 10*time.Millisecond)
	assert.Positive(t, count(t, db, `SELECT count(*) FROM job_runs WHERE job = 'hook'`))
}

// A definition that reached the store (written before an operator narrowed
// SCHEDULER_HTTP_ALLOW) cannot make the leader call a private address: the run fails with
// the refusal and no connection is made.
func TestRuntimeCallToAPrivateAddressIsRefusedAtRunTime(t *testing.T) {
	db, url := newDB(t)
	var calls atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { calls.Add(1) }))
	t.Cleanup(srv.Close)
	n := startNode(t, url, "a", nodeOptions{runtime: runtimeFor(t), pollInterval: 200 * time.Millisecond})
	awaitSignal(t, &n.en.testSignals.leading, "leading")
	createDefinition(t, db, `{"name": "sneaky", "schedule": "0 0 1 1 *", "http": {"url": "`+srv.URL+`"}}`)
	awaitSignal(t, &n.en.testSignals.definitionLoaded, "loaded")

	id := queueRun(t, db, "sneaky")
	r := awaitFinished(t, db, id)
	assert.Equal(t, store.StatusFailed, r.Status)
	require.NotNil(t, r.Error)
	assert.Contains(t, *r.Error, "loopback")
	assert.Zero(t, calls.Load(), "no call reached the private address")
}

// A job whose runs keep failing pauses itself after pause_after_failures runs in a row, and
// the audit log says why.
func TestRuntimeJobPausesAfterFailuresInARow(t *testing.T) {
	db, url := newDB(t)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusBadRequest)
	}))
	t.Cleanup(srv.Close)
	n := startNode(t, url, "a", nodeOptions{runtime: runtimeFor(t, "127.0.0.1/32"), pollInterval: 200 * time.Millisecond})
	awaitSignal(t, &n.en.testSignals.leading, "leading")
	createDefinition(t, db, `{"name": "broken", "schedule": "@every 1s", "pause_after_failures": 2,
		"http": {"url": "`+srv.URL+`"}}`)

	require.Eventually(t, func() bool {
		return count(t, db, `SELECT count(*) FROM job_settings WHERE job = 'broken' AND paused`) == 1
	}, waitTimeout, 20*time.Millisecond, "the job paused itself")
	assert.Equal(t, 2, count(t, db, `SELECT count(*) FROM job_runs WHERE job = 'broken' AND status = 'failed'`),
		"it paused after exactly two failed runs")
	assert.Equal(t, 1, count(t, db, `SELECT count(*) FROM operator_actions WHERE action = 'auto-pause' AND job = 'broken' AND reason LIKE '%2 failed runs in a row%'`))
	var attempts int
	require.NoError(t, db.Pool.QueryRow(context.Background(), `
		SELECT count(*) FROM run_attempts a JOIN job_runs r ON r.id = a.run_id
		WHERE r.job = 'broken' AND a.status_code = 400`).Scan(&attempts))
	assert.Equal(t, 2, attempts, "a 400 is not retried: one recorded attempt per run")
}

// A secret's value never reaches a log line or a recorded attempt, even from a target that
// echoes the request back.
func TestSecretValuesStayOutOfLogsAndAttempts(t *testing.T) {
	const secret = "s3cr3t-bearer-value"
	db, url := newDB(t)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusBadGateway) // an error, so the body is also in the run's error
		_, _ = w.Write([]byte("you sent " + r.Header.Get("Authorization")))
	}))
	t.Cleanup(srv.Close)
	var logs syncBuffer
	rt := runtimeFor(t, "127.0.0.1/32")
	rt.Secrets = secrets.New(map[string]string{"ECHO_TOKEN": secret}, nil, db.DB)
	n := startNode(t, url, "a", nodeOptions{runtime: rt, pollInterval: 200 * time.Millisecond,
		log: slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	awaitSignal(t, &n.en.testSignals.leading, "leading")
	createDefinition(t, db, `{"name": "echo", "schedule": "0 0 1 1 *", "retry": {"max_attempts": 2, "initial_backoff": "100ms"},
		"http": {"url": "`+srv.URL+`", "auth": {"bearer_secret": "ECHO_TOKEN"}}}`)
	awaitSignal(t, &n.en.testSignals.definitionLoaded, "loaded")

	r := awaitFinished(t, db, queueRun(t, db, "echo"))
	assert.Equal(t, store.StatusFailed, r.Status)
	require.NotNil(t, r.Error)
	assert.NotContains(t, *r.Error, secret)
	attempts, err := db.Attempts(context.Background(), r.ID)
	require.NoError(t, err)
	require.Len(t, attempts, 2, "a 502 is retried")
	for _, a := range attempts {
		require.NotNil(t, a.Body)
		assert.Equal(t, "you sent Bearer [secret]", *a.Body)
	}
	assert.NotContains(t, logs.String(), secret)
	assert.Contains(t, logs.String(), "call attempt", "the log was captured")
}

// overlap queue-one: a slot that comes due while the job runs waits for it and then runs;
// the slots after it, while it waits, are skipped.
func TestQueueOneRunsTheWaitingSlotAfterTheActiveRun(t *testing.T) {
	db, url := newDB(t)
	release := make(chan struct{})
	var calls atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) == 1 {
			select { // the first call lasts until the test has seen the next slots come due
			case <-release:
			case <-time.After(waitTimeout):
			}
		}
	}))
	t.Cleanup(srv.Close)
	n := startNode(t, url, "a", nodeOptions{runtime: runtimeFor(t, "127.0.0.1/32"), pollInterval: 200 * time.Millisecond})
	awaitSignal(t, &n.en.testSignals.leading, "leading")
	createDefinition(t, db, `{"name": "slow", "schedule": "@every 1s", "overlap": "queue-one", "timeout": "30s",
		"http": {"url": "`+srv.URL+`", "timeout": "30s"}}`)

	require.Eventually(t, func() bool {
		return count(t, db, `SELECT count(*) FROM job_runs WHERE job = 'slow' AND status = 'skipped' AND reason = 'overlap'`) >= 2
	}, waitTimeout, 20*time.Millisecond, "later slots are skipped while one waits")
	first := count(t, db, `SELECT count(*) FROM job_runs WHERE job = 'slow' AND status = 'running'`)
	require.Equal(t, 1, first)
	var waitingSlot time.Time
	require.NoError(t, db.Pool.QueryRow(context.Background(), `
		SELECT min(scheduled_at) + interval '1 second' FROM job_runs WHERE job = 'slow' AND status = 'running'`).Scan(&waitingSlot))
	assert.Zero(t, count(t, db, `SELECT count(*) FROM job_runs WHERE job = 'slow' AND scheduled_at = $1`, waitingSlot),
		"the waiting slot has no row while it waits")
	close(release)
	require.Eventually(t, func() bool {
		return count(t, db, `SELECT count(*) FROM job_runs WHERE job = 'slow' AND scheduled_at = $1 AND status = 'succeeded'`, waitingSlot) == 1
	}, waitTimeout, 20*time.Millisecond, "the waiting slot ran once the first run ended")
}

// Jobs on one schedule share one timer, and the slots they have due at an instant are claimed
// together: 300 jobs on "@every 1s" take a handful of claim transactions a second, not 300,
// and every slot of every job still has exactly one row.
func TestSlotsDueTogetherAreClaimedInBatches(t *testing.T) {
	const jobs = 300
	db, url := newDB(t)
	var calls atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { calls.Add(1) }))
	t.Cleanup(srv.Close)
	for i := range jobs {
		createDefinition(t, db, fmt.Sprintf(`{"name": "together-%03d", "schedule": "@every 1s", "http": {"url": "%s"}}`, i, srv.URL))
	}
	n := startNode(t, url, "a", nodeOptions{runtime: runtimeFor(t, "127.0.0.1/32"), pollInterval: time.Minute})
	awaitSignal(t, &n.en.testSignals.leading, "leading")
	// Count the batches until the timers have claimed three slots of every job. (A timer
	// that fired for the election's slot while the catch-up claimed it loses its claim, but
	// its claim was still made, and counts.)
	perSlot := map[time.Time]int{}
	var full []time.Time
	batches := 0
	for len(full) < 3 {
		for _, c := range awaitSignal(t, &n.en.testSignals.claimBatch, "a batch of claims") {
			if perSlot[c.ScheduledAt]++; perSlot[c.ScheduledAt] == jobs {
				full = append(full, c.ScheduledAt)
			}
		}
		batches++
	}
	assert.LessOrEqual(t, batches, 3*5, "claims of 3 slots took %d batches: %v", batches, perSlot)
	var stoppedAt time.Time
	require.NoError(t, db.Pool.QueryRow(context.Background(), `SELECT now()`).Scan(&stoppedAt))
	n.stop()

	// Every slot the timers claimed for every job has one row per job.
	for _, slot := range full {
		assert.Equal(t, jobs, count(t, db, `SELECT count(*) FROM job_runs WHERE job LIKE 'together-%' AND scheduled_at = $1`, slot),
			"rows of slot %s", slot)
	}
	var bad []string
	require.NoError(t, db.Pool.QueryRow(context.Background(), `
		SELECT coalesce(array_agg(scheduled_at || ': ' || per_slot) FILTER (WHERE per_slot <> $1 AND scheduled_at < $2), '{}')
		FROM (SELECT scheduled_at, count(*) AS per_slot FROM job_runs
		      WHERE job LIKE 'together-%' AND scheduled_at >= (
		          SELECT min(scheduled_at) FROM job_runs WHERE job LIKE 'together-%' AND trigger = 'schedule'
		                                                   AND status <> 'missed')
		      GROUP BY scheduled_at) s`, jobs, stoppedAt.Add(-time.Second)).Scan(&bad))
	// Every slot from the timers' first has a row for every job, but those due in the last
	// second before the stop, which it may have cut. (Slots before the election are the
	// catch-up's, which records the older ones missed, with trigger schedule, for the jobs
	// whose definition held then: a loaded machine creating 300 jobs crosses a second, so
	// not all of them. The election's slot is the catch-up's too:
	// a job with no run yet has it caught up only if the catch-up reached the job before
	// the next slot came due, so on a loaded machine only some jobs have it.)
	assert.Empty(t, bad, "slots without exactly one row per job (slot: rows); all: %v", slotCounts(t, db))
	assert.Zero(t, count(t, db, `
		SELECT count(*) FROM (SELECT job, scheduled_at FROM job_runs WHERE job LIKE 'together-%'
		                      GROUP BY job, scheduled_at HAVING count(*) > 1) d`), "a slot recorded twice")
	assert.Positive(t, calls.Load())
}

// slotCounts lists the together jobs' rows per slot and status, for a failure's message.
func slotCounts(t *testing.T, db *testdb.DB) []string {
	rows, err := db.Pool.Query(context.Background(), `
		SELECT scheduled_at || ' ' || status || ' ' || trigger || ': ' || count(*) FROM job_runs
		WHERE job LIKE 'together-%' GROUP BY scheduled_at, status, trigger ORDER BY scheduled_at`)
	require.NoError(t, err)
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	return out
}

// A run queued for a job defined a moment ago, before the leader's watch has followed the
// definition, runs it instead of failing as a job the leader does not know: the create
// and the trigger come from different replicas, and nothing orders the watch before the
// queue. The definition is stored with its notification suppressed and the poll a
// minute away, so only the queue can load it.
func TestRunQueuedBeforeTheDefinitionIsFollowedRunsTheJob(t *testing.T) {
	db, url := newDB(t)
	var calls atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { calls.Add(1) }))
	t.Cleanup(srv.Close)
	n := startNode(t, url, "a", nodeOptions{runtime: runtimeFor(t, "127.0.0.1/32"), pollInterval: time.Minute})
	awaitSignal(t, &n.en.testSignals.leading, "leading")
	// The watch reads every definition once its listening starts, which may come after
	// leading: a definition stored before that read would be loaded by it, not the queue.
	awaitSignal(t, &n.en.testSignals.definitionsRead, "the definition watch's first read")

	j := checkDefinition(t, `{"name": "fresh", "schedule": "0 0 1 1 *", "http": {"url": "`+srv.URL+`"}}`)
	b, err := json.Marshal(j.Def)
	require.NoError(t, err)
	ctx := context.Background()
	tx, err := db.Pool.Begin(ctx)
	require.NoError(t, err)
	_, err = tx.Exec(ctx, `SET LOCAL session_replication_role = replica`) // no NOTIFY trigger
	require.NoError(t, err)
	_, err = tx.Exec(ctx, `INSERT INTO job_definitions (name, kind, definition) VALUES ('fresh', $1, $2)`, j.Def.Kind(), b)
	require.NoError(t, err)
	require.NoError(t, tx.Commit(ctx))
	require.Nil(t, n.en.entry("fresh"), "the leader has not followed the definition")

	r := awaitFinished(t, db, queueRun(t, db, "fresh"))
	assert.Equal(t, store.StatusSucceeded, r.Status, "%v", r.Error)
	assert.Equal(t, int64(1), calls.Load())
	assert.NotNil(t, n.en.entry("fresh"), "the job is loaded for its slots too")

	// A job that is not defined at all still fails, saying so.
	r = awaitFinished(t, db, queueRun(t, db, "never-defined"))
	assert.Equal(t, store.StatusFailed, r.Status)
	require.NotNil(t, r.Error)
	assert.Contains(t, *r.Error, "not configured on the leader")
}
