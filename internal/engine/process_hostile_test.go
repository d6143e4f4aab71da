package engine

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schedulerhq/scheduler/internal/store"
	"github.com/schedulerhq/scheduler/internal/testdb"
)

// hostileLease is the processes' SCHEDULER_LEASE_TIMEOUT (startProcessIn).
const hostileLease = 2 * time.Second

// The attack of docs/design.md guarantee 12: SQL jobs written to stop the scheduler, run in a
// target that is the scheduler's own database, among three real processes. One renames its
// session to a scheduler's name and loops trapping every cancel; one sends notifications on
// every channel the scheduler listens to, with every epoch as payload; one takes every
// advisory key the scheduler has used and waits for the election's. Meanwhile: their
// backends never outlive their timeout by more than 5 s; leadership does not move without an
// action; a step-down and two SIGKILLs each elect a leader within the lease + 3 s; an HTTP
// job due every second keeps its schedule.
func TestHostileSQLJobsCannotStopTheScheduler(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real processes")
	}
	bin := buildScheduler(t, t.TempDir())
	db, url := testdb.Open(t, store.Options{InstanceID: "test"})
	ctx := context.Background()
	login, loginURL := testdb.Login(t, url)
	initMarkers(t, url, login)

	var ticks sync.Map // slot → calls
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, _ := ticks.LoadOrStore(r.Header.Get("X-Scheduler-Scheduled-At"), new(int))
		*n.(*int)++
	}))
	t.Cleanup(srv.Close)
	createDefinition(t, db, `{"name": "tick", "schedule": "@every 1s", "timeout": "5s", "http": {"url": "`+srv.URL+`/tick"}}`)

	const loopTimeout = 2 * time.Second
	channels := "'" + strings.Join([]string{store.StepDownChannel, store.RunsChannel, store.RunFinishedChannel, store.DefinitionsChannel}, "','") + "'"
	createDefinition(t, db, `{"name": "renamed-loop", "schedule": "@every 3s", "timeout": "2s", "sql": {"target": "HOSTILE",
		"statements": "SET application_name = 'scheduler:hostile-1'; DO $$ BEGIN LOOP BEGIN PERFORM pg_sleep(0.05); EXCEPTION WHEN query_canceled THEN NULL; END; END LOOP; END $$"}}`)
	createDefinition(t, db, `{"name": "notify-everything", "schedule": "@every 1s", "timeout": "5s", "sql": {"target": "HOSTILE",
		"statements": "SELECT pg_notify(c, g::text) FROM unnest(ARRAY[`+channels+`]) c, generate_series(0, 300) g"}}`)
	createDefinition(t, db, `{"name": "hold-locks", "schedule": "@every 5s", "timeout": "25s", "sql": {"target": "HOSTILE",
		"statements": "SELECT pg_try_advisory_lock(hashtextextended(k, 0)) FROM unnest(ARRAY['scheduler:active_runs', 'scheduler:job_definitions', 'scheduler:run_partitions']) k; SELECT pg_advisory_lock(hashtextextended('scheduler-leader', 0)); SELECT pg_sleep(20)"}}`)

	// Backends of the hostile login that outlived their run's timeout by more than 5 s
	// (hold-locks' 25 s included), sampled until the test ends.
	watchCtx, stopWatch := context.WithCancel(ctx)
	var overstayed []string
	var watched sync.WaitGroup
	watched.Add(1)
	go func() {
		defer watched.Done()
		for watchCtx.Err() == nil {
			rows, err := db.Pool.Query(watchCtx, `
				SELECT pid || ' ' || application_name || ' ' || left(query, 40) FROM pg_stat_activity
				WHERE usename = $1 AND backend_start < now() - CASE WHEN query LIKE '%DO $$%'
				      THEN make_interval(secs => $2) ELSE make_interval(secs => 25 + 5 + 1) END`,
				login, (loopTimeout + 5*time.Second + time.Second).Seconds())
			if err == nil {
				for rows.Next() {
					var s string
					if rows.Scan(&s) == nil {
						overstayed = append(overstayed, s)
					}
				}
				rows.Close()
			}
			select {
			case <-watchCtx.Done():
			case <-time.After(200 * time.Millisecond):
			}
		}
	}()

	env := []string{"SCHEDULER_HTTP_ALLOW=127.0.0.1/32", "SCHEDULER_SQL_TARGET_HOSTILE=" + loginURL,
		"SCHEDULER_JOB_ROUNDS_CLOSE_ENABLED=false"}
	procs, addrs := map[string]*process{}, map[string]string{}
	for _, id := range []string{"hostile-1", "hostile-2", "hostile-3"} {
		addrs[id] = freeAddr(t)
		procs[id] = startProcessIn(t, "", bin, url, id, append(env, "SCHEDULER_HTTP_ADDR="+addrs[id])...)
	}
	l := awaitLeader(t, db, procs, 0)

	// Quiet: every hostile job runs under this term, and leadership stays put.
	awaitRuns(t, db, l.Epoch, map[string]int{"renamed-loop": 2, "notify-everything": 5, "hold-locks": 2, "tick": 8})
	now, err := db.Leader(ctx)
	require.NoError(t, err)
	assert.Equal(t, l.Epoch, now.Epoch, "leadership moved without an action")
	// A run claimed late in its second (the catch-up at the election, or a claim that waited
	// for the CPU while the election's catch-up runs ran) may still run when the next slot
	// comes due: that slot is skipped as an overlap, by design. No other is.
	assert.Zero(t, count(t, db, `SELECT count(*) FROM job_runs s WHERE s.job = 'tick' AND s.status = 'skipped'
		AND NOT EXISTS (SELECT 1 FROM job_runs p WHERE p.job = 'tick' AND p.scheduled_at = s.scheduled_at - interval '1 second'
		                AND (p.trigger = 'catch-up' OR p.started_at >= p.scheduled_at + interval '500 milliseconds'))`),
		"a tick was skipped: %v", skipped(t, db))

	// A step-down elects a leader within the lease + 3 s.
	asked := time.Now()
	resp, err := http.Post("http://"+addrs[l.InstanceID]+"/v1/leader/step-down", "application/json", nil)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusAccepted, resp.StatusCode)
	l = awaitLeader(t, db, procs, l.Epoch)
	assert.Less(t, time.Since(asked), hostileLease+3*time.Second, "a leader after the step-down")

	var lastKill time.Time
	for kill := 0; kill < 2; kill++ {
		awaitRuns(t, db, l.Epoch, map[string]int{"hold-locks": 1, "tick": 3})
		// Killed while the loop runs: its backend is left behind by the dead replica, and
		// the next leader must end it.
		require.Eventually(t, func() bool {
			return count(t, db, `SELECT count(*) FROM job_runs r JOIN scheduler_sql_backends b ON b.run_id = r.id
				WHERE r.job = 'renamed-loop' AND r.status = 'running' AND r.epoch = $1`, l.Epoch) > 0
		}, 30*time.Second, 20*time.Millisecond, "a running loop under epoch %d", l.Epoch)
		p := procs[l.InstanceID]
		lastKill = time.Now()
		killed := time.Now()
		require.NoError(t, p.cmd.Process.Signal(syscall.SIGKILL))
		_ = p.cmd.Wait()
		l = awaitLeader(t, db, procs, l.Epoch)
		assert.Less(t, time.Since(killed), hostileLease+3*time.Second, "a leader after SIGKILL %d", kill+1)
	}
	awaitRuns(t, db, l.Epoch, map[string]int{"tick": 5})
	// The last orphaned loop must be gone by its timeout + 5 s after the kill: watch past it.
	for time.Since(lastKill) < loopTimeout+7*time.Second {
		time.Sleep(100 * time.Millisecond) // an absence over a span: nothing to await
	}
	stopWatch()
	watched.Wait()
	assert.Empty(t, overstayed, "hostile backends outlived their timeout by more than 5 s")

	// The tick kept its schedule under the last term: every slot after its first scheduled
	// claim (the one before may overlap the election's catch-up run) has a succeeded run,
	// or was skipped as the overlap of a run that started late in its second, as above.
	gaps := count(t, db, `
		SELECT count(*) FROM generate_series(
			(SELECT min(scheduled_at) + interval '1 second' FROM job_runs WHERE job = 'tick' AND epoch = $1 AND trigger = 'schedule'),
			(SELECT max(scheduled_at) FROM job_runs WHERE job = 'tick' AND epoch = $1), interval '1 second') AS s
		WHERE NOT EXISTS (SELECT 1 FROM job_runs WHERE job = 'tick' AND scheduled_at = s AND status = 'succeeded')
		  AND NOT EXISTS (SELECT 1 FROM job_runs k JOIN job_runs p ON p.job = 'tick' AND p.scheduled_at = s - interval '1 second'
		                  WHERE k.job = 'tick' AND k.scheduled_at = s AND k.status = 'skipped'
		                    AND p.started_at >= p.scheduled_at + interval '500 milliseconds')`, l.Epoch)
	assert.Zero(t, gaps, "slots of the last term without a succeeded tick: %v", skipped(t, db))
	assert.Zero(t, count(t, db, `SELECT count(*) FROM job_runs WHERE job = 'renamed-loop' AND status = 'succeeded'`))
	loopRuns := count(t, db, `SELECT count(*) FROM job_runs WHERE job = 'renamed-loop' AND status = 'timed_out'
		AND finished_at - started_at < make_interval(secs => $1)`, (loopTimeout + 5*time.Second).Seconds())
	assert.Positive(t, loopRuns, "the renamed loop was recorded timed_out within its timeout + 5 s")
	assert.Zero(t, count(t, db, `SELECT count(*) FROM job_runs WHERE job = 'renamed-loop' AND status = 'timed_out'
		AND finished_at - started_at >= make_interval(secs => $1)`, (loopTimeout+5*time.Second).Seconds()))
}

// awaitRuns waits until each job has at least n finished runs under epoch.
func awaitRuns(t *testing.T, db *testdb.DB, epoch int64, want map[string]int) {
	t.Helper()
	require.Eventually(t, func() bool {
		for job, n := range want {
			var got int
			err := db.Pool.QueryRow(context.Background(), `
				SELECT count(*) FROM job_runs WHERE job = $1 AND epoch = $2 AND finished_at IS NOT NULL`, job, epoch).Scan(&got)
			if err != nil || got < n {
				return false
			}
		}
		return true
	}, 60*time.Second, 50*time.Millisecond, "runs %v under epoch %d", want, epoch)
}

// freeAddr is a loopback address with a port free now.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	return l.Addr().String()
}

// skipped lists the tick's skipped slots with their reasons and the run before each.
func skipped(t *testing.T, db *testdb.DB) []string {
	rows, err := db.Pool.Query(context.Background(), `
		SELECT s.scheduled_at || ' ' || coalesce(s.reason, '') || ' after ' || coalesce(p.status, '?') || ' ' ||
		       coalesce((p.finished_at - p.started_at)::text, 'unfinished') || ', claimed ' ||
		       coalesce((p.started_at - p.scheduled_at)::text, '?') || ' after its slot' 
		FROM job_runs s LEFT JOIN job_runs p ON p.job = 'tick' AND p.scheduled_at = s.scheduled_at - interval '1 second'
		WHERE s.job = 'tick' AND s.status = 'skipped'`)
	require.NoError(t, err)
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	return out
}
