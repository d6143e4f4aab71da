package engine

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schedulerhq/scheduler/internal/store"
	"github.com/schedulerhq/scheduler/internal/targets"
	"github.com/schedulerhq/scheduler/internal/testdb"
)

// receivedCall is one request a runtime HTTP job made.
type receivedCall struct {
	key, slot, attempt, runID string
}

// receiver records every call and fails the first attempt of every third key with a 503, so
// retries happen; its answers are otherwise 200, after a delay, so that a leader killed while
// a call is in flight leaves its run to be recovered. inFlight hears of each call as it
// arrives, when a test waits for one.
type receiver struct {
	mu       sync.Mutex
	calls    []receivedCall
	seen     map[string]int
	inFlight chan string
}

func (rc *receiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rc.mu.Lock()
	c := receivedCall{key: r.Header.Get("Idempotency-Key"), slot: r.Header.Get("X-Scheduler-Scheduled-At"),
		attempt: r.Header.Get("X-Scheduler-Attempt"), runID: r.Header.Get("X-Scheduler-Run-Id")}
	rc.calls = append(rc.calls, c)
	rc.seen[c.key]++
	fail := rc.seen[c.key] == 1 && len(rc.seen)%3 == 0
	rc.mu.Unlock()
	select {
	case rc.inFlight <- c.key:
	default:
	}
	time.Sleep(300 * time.Millisecond) // the call's own duration, not a synchronisation
	if fail {
		w.WriteHeader(http.StatusServiceUnavailable)
		return
	}
	w.WriteHeader(http.StatusOK)
}

// A runtime HTTP job and a runtime SQL job, each every second, through two SIGKILLs of the
// leader among three real processes (docs/design.md guarantee 11): every slot ends with one
// row; every slot that ran reached the receiver under one key that no other slot used, the
// same on every retry and recovery, so deduplicating by key leaves one effect per slot; and
// the SQL job's statements committed exactly once per slot that ran, none missing.
func TestRuntimeJobsOncePerSlotThroughLeaderKills(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real processes")
	}
	bin := buildScheduler(t, t.TempDir())
	db, url := testdb.Open(t, store.Options{InstanceID: "test"})
	ctx := context.Background()
	// The SQL job's target is another database, reached with a login of its own.
	appURL := testdb.New(t)
	app := testdb.Pool(t, appURL)
	_, err := app.Exec(ctx, `CREATE TABLE effects (slot timestamptz NOT NULL, run_id bigint NOT NULL)`)
	require.NoError(t, err)
	login, loginURL := testdb.Login(t, appURL, `GRANT INSERT ON effects TO %s`)
	initMarkers(t, appURL, login)

	rc := &receiver{seen: map[string]int{}, inFlight: make(chan string)}
	srv := httptest.NewServer(rc)
	t.Cleanup(srv.Close)
	createDefinition(t, db, `{"name": "call-every-second", "schedule": "@every 1s", "timeout": "10s",
		"retry": {"max_attempts": 3, "initial_backoff": "100ms", "max_backoff": "200ms"},
		"http": {"url": "`+srv.URL+`/tick", "timeout": "2s"}}`)
	createDefinition(t, db, `{"name": "insert-every-second", "schedule": "@every 1s", "timeout": "10s",
		"sql": {"target": "APP", "statements": "SELECT pg_sleep(0.3); INSERT INTO effects VALUES (current_setting('scheduler.scheduled_at')::timestamptz, current_setting('scheduler.run_id')::bigint)"}}`)

	env := []string{"SCHEDULER_HTTP_ALLOW=127.0.0.1/32", "SCHEDULER_SQL_TARGET_APP=" + loginURL,
		"SCHEDULER_JOB_ROUNDS_CLOSE_ENABLED=false"}
	procs := map[string]*process{}
	for _, id := range []string{"rt-a", "rt-b", "rt-c"} {
		procs[id] = startProcessIn(t, "", bin, url, id, env...)
	}
	epoch := int64(0)
	for kill := 0; kill < 2; kill++ {
		l := awaitLeader(t, db, procs, epoch)
		epoch = l.Epoch
		awaitRuntimeSuccesses(t, db, epoch, 4)
		// Killed while a call is in flight, so that slot's run is abandoned and recovered.
		select {
		case <-rc.inFlight:
		case <-time.After(waitTimeout):
			t.Fatal("no call arrived")
		}
		p := procs[l.InstanceID]
		require.NoError(t, p.cmd.Process.Signal(syscall.SIGKILL))
		_ = p.cmd.Wait()
	}
	l := awaitLeader(t, db, procs, epoch)
	awaitRuntimeSuccesses(t, db, l.Epoch, 4)
	for _, p := range procs {
		if p.cmd.ProcessState == nil {
			require.NoError(t, p.cmd.Process.Signal(syscall.SIGTERM))
			_ = p.cmd.Wait()
		}
	}

	for _, job := range []string{"call-every-second", "insert-every-second"} {
		// Every slot from the first to the last ends with exactly one row.
		gaps := count(t, db, `
			SELECT count(*) FROM generate_series(
				(SELECT min(scheduled_at) FROM job_runs WHERE job = $1),
				(SELECT max(scheduled_at) FROM job_runs WHERE job = $1), interval '1 second') AS s
			WHERE NOT EXISTS (SELECT 1 FROM job_runs WHERE job = $1 AND scheduled_at = s)`, job)
		assert.Zero(t, gaps, "%s: slots without a row", job)
	}

	// The slots whose work was done: a succeeded run, or an abandoned one whose recovery
	// succeeded.
	done := func(job string) map[string]bool {
		rows, err := db.Pool.Query(ctx, `
			SELECT to_char(coalesce(r.scheduled_at, o.scheduled_at) AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"')
			FROM job_runs r LEFT JOIN job_runs o ON o.id = r.recovers_run_id
			WHERE r.job = $1 AND r.status = 'succeeded'`, job)
		require.NoError(t, err)
		slots := map[string]bool{}
		for rows.Next() {
			var s string
			require.NoError(t, rows.Scan(&s))
			assert.False(t, slots[s], "%s: slot %s succeeded twice", job, s)
			slots[s] = true
		}
		require.NoError(t, rows.Err())
		return slots
	}

	calledSlots := done("call-every-second")
	require.GreaterOrEqual(t, len(calledSlots), 10, "the HTTP job ran")
	rc.mu.Lock()
	keyOfSlot, slotOfKey := map[string]string{}, map[string]string{}
	for _, c := range rc.calls {
		require.NotEmpty(t, c.key)
		if k, ok := keyOfSlot[c.slot]; ok {
			assert.Equal(t, k, c.key, "slot %s was called with two keys", c.slot)
		}
		if s, ok := slotOfKey[c.key]; ok {
			assert.Equal(t, s, c.slot, "key %s was used for two slots", c.key)
		}
		keyOfSlot[c.slot], slotOfKey[c.key] = c.key, c.slot
	}
	retried := 0
	for _, n := range rc.seen {
		if n > 1 {
			retried++
		}
	}
	rc.mu.Unlock()
	for slot := range calledSlots {
		assert.Contains(t, keyOfSlot, slot, "slot %s succeeded without reaching the receiver", slot)
	}
	assert.GreaterOrEqual(t, count(t, db, `SELECT count(*) FROM job_runs WHERE job = 'call-every-second' AND trigger = 'recovery' AND status = 'succeeded'`), 2,
		"each kill left a call in flight, which a recovery run made again")
	assert.Positive(t, retried, "some slots were retried (the receiver fails every third key once)")

	var effects []struct {
		Slot string `json:"slot"`
		N    int    `json:"n"`
	}
	var raw []byte
	require.NoError(t, app.QueryRow(ctx, `
		SELECT coalesce(json_agg(e), '[]') FROM (
			SELECT to_char(slot AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"') AS slot, count(*) AS n
			FROM effects GROUP BY slot) e`).Scan(&raw))
	require.NoError(t, json.Unmarshal(raw, &effects))
	insertedSlots := done("insert-every-second")
	require.GreaterOrEqual(t, len(insertedSlots), 10, "the SQL job ran")
	got := map[string]bool{}
	for _, e := range effects {
		assert.Equal(t, 1, e.N, "slot %s committed %d times", e.Slot, e.N)
		got[e.Slot] = true
	}
	assert.Equal(t, insertedSlots, got, "the SQL job's effects are exactly the slots recorded succeeded")
}

// awaitRuntimeSuccesses waits until both runtime jobs succeeded n times under epoch.
func awaitRuntimeSuccesses(t *testing.T, db *testdb.DB, epoch int64, n int) {
	t.Helper()
	require.Eventually(t, func() bool {
		var got int
		err := db.Pool.QueryRow(context.Background(), `
			SELECT coalesce(min(c), 0) FROM (
				SELECT count(*) FILTER (WHERE status = 'succeeded' AND epoch = $1) AS c
				FROM job_runs WHERE job IN ('call-every-second', 'insert-every-second') GROUP BY job
				HAVING count(DISTINCT job) > 0) per_job
			WHERE (SELECT count(DISTINCT job) FROM job_runs WHERE job IN ('call-every-second', 'insert-every-second') AND epoch = $1) = 2`,
			epoch).Scan(&got)
		return err == nil && got >= n
	}, 60*time.Second, 20*time.Millisecond, "both runtime jobs to succeed %d times under epoch %d", n, epoch)
}

// initMarkers creates a SQL target's marker table as an administrator does
// (scheduler sql-target init --admin-url): the target's login may not create tables in the
// scheduler's schema.
func initMarkers(t *testing.T, adminURL, login string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, adminURL)
	require.NoError(t, err)
	defer conn.Close(ctx)
	require.NoError(t, targets.InitMarkers(ctx, conn, login))
}
