package engine

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schedulerhq/scheduler/internal/store"
	"github.com/schedulerhq/scheduler/internal/testdb"
	"github.com/schedulerhq/scheduler/internal/testpace"
)

// chainReceiver answers extract, transform and load's calls, recording each; transform's
// calls fail while failTransform is set. inFlight hears of each call as it arrives.
type chainReceiver struct {
	mu            sync.Mutex
	calls         map[string][]receivedCall // by job (the path)
	failTransform atomic.Bool
	inFlight      chan string
}

func (rc *chainReceiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	job := strings.TrimPrefix(r.URL.Path, "/")
	c := receivedCall{key: r.Header.Get("Idempotency-Key"), slot: r.Header.Get("X-Scheduler-Scheduled-At"),
		attempt: r.Header.Get("X-Scheduler-Attempt"), runID: r.Header.Get("X-Scheduler-Run-Id")}
	rc.mu.Lock()
	rc.calls[job] = append(rc.calls[job], c)
	rc.mu.Unlock()
	select {
	case rc.inFlight <- job:
	default:
	}
	time.Sleep(200 * time.Millisecond) // the call's own duration, not a synchronisation
	if job == "transform" && rc.failTransform.Load() {
		w.WriteHeader(http.StatusInternalServerError)
		return
	}
	w.WriteHeader(http.StatusOK)
}

// The chain extract → transform → load on @every 2s among three real processes, through a
// SIGKILL of the leader while a call is in flight (issue 46): each load run follows exactly
// one successful transform run of its slot, and no child runs twice for one parent slot; a
// forced failure of transform records load's slot skipped (parent failed), and a re-run of
// that transform slot runs load once.
func TestAfterChainThroughLeaderKill(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real processes")
	}
	bin := buildScheduler(t, t.TempDir())
	db, url := testdb.Open(t, store.Options{InstanceID: "test"})
	ctx := context.Background()
	rc := &chainReceiver{calls: map[string][]receivedCall{}, inFlight: make(chan string)}
	srv := httptest.NewServer(rc)
	t.Cleanup(srv.Close)
	createDefinition(t, db, `{"name": "extract", "schedule": "@every 2s", "timeout": "10s", "http": {"url": "`+srv.URL+`/extract"}}`)
	createDefinition(t, db, `{"name": "transform", "after": ["extract"], "timeout": "10s",
		"retry": {"max_attempts": 1}, "http": {"url": "`+srv.URL+`/transform"}}`)
	createDefinition(t, db, `{"name": "load", "after": ["transform"], "timeout": "10s", "http": {"url": "`+srv.URL+`/load"}}`)

	env := []string{"SCHEDULER_HTTP_ALLOW=127.0.0.1/32", "SCHEDULER_JOB_ROUNDS_CLOSE_ENABLED=false"}
	procs := map[string]*process{}
	for _, id := range []string{"ch-a", "ch-b", "ch-c"} {
		procs[id] = startProcessIn(t, "", bin, url, id, env...)
	}
	l := awaitLeader(t, db, procs, 0)
	awaitCount(t, db, 3, `SELECT count(*) FROM job_runs WHERE job = 'load' AND status = 'succeeded'`)

	// Killed while a transform call is in flight: its run is abandoned and recovered.
	deadline := time.After(waitTimeout)
	for job := ""; job != "transform"; {
		select {
		case job = <-rc.inFlight:
		case <-deadline:
			t.Fatal("no transform call arrived")
		}
	}
	p := procs[l.InstanceID]
	require.NoError(t, p.cmd.Process.Signal(syscall.SIGKILL))
	_ = p.cmd.Wait()
	l = awaitLeader(t, db, procs, l.Epoch)
	awaitCount(t, db, 3, `SELECT count(*) FROM job_runs WHERE job = 'load' AND status = 'succeeded' AND epoch = $1`, l.Epoch)

	// A forced failure of transform: load's slot is recorded skipped, linked to it.
	rc.failTransform.Store(true)
	var failedID int64
	var failedSlot time.Time
	require.Eventually(t, func() bool {
		err := db.Pool.QueryRow(ctx, `SELECT id, scheduled_at FROM job_runs WHERE job = 'transform' AND status = 'failed' ORDER BY id LIMIT 1`).
			Scan(&failedID, &failedSlot)
		return err == nil
	}, waitTimeout, 20*time.Millisecond, "a transform run failed")
	rc.failTransform.Store(false)
	awaitCount(t, db, 1, `SELECT count(*) FROM job_runs WHERE job = 'load' AND scheduled_at = $1 AND status = 'skipped'
		AND reason = 'parent failed' AND parent_run_ids = ARRAY[$2::bigint]`, failedSlot, failedID)

	// A re-run of that transform slot (as POST /v1/runs/{id}/rerun queues it) runs load once.
	var rerun *store.Run
	require.Eventually(t, func() bool {
		r, created, err := db.QueueSlotRun(ctx, "transform", failedSlot, store.TriggerRerun, nil, nil)
		rerun = r
		return err == nil && created
	}, waitTimeout, 50*time.Millisecond, "the re-run is queued once transform has no active run")
	awaitCount(t, db, 1, `SELECT count(*) FROM job_runs WHERE job = 'load' AND scheduled_at = $1 AND status = 'succeeded'
		AND parent_run_ids = ARRAY[$2::bigint]`, failedSlot, rerun.ID)
	awaitCount(t, db, 2, `SELECT count(*) FROM job_runs WHERE job = 'load' AND status = 'succeeded' AND id > $1`, rerun.ID)

	for _, p := range procs {
		if p.cmd.ProcessState == nil {
			require.NoError(t, p.cmd.Process.Signal(syscall.SIGTERM))
			_ = p.cmd.Wait()
		}
	}

	// Each load run follows exactly one successful transform run of its slot, which follows
	// one of extract's (a recovery run counts for the slot it recovered).
	bad := count(t, db, `
		SELECT count(*) FROM job_runs c
		WHERE c.job IN ('transform', 'load') AND c.trigger = 'after' AND c.status <> 'skipped'
		  AND NOT EXISTS (
			SELECT 1 FROM job_runs p
			WHERE p.id = c.parent_run_ids[1] AND cardinality(c.parent_run_ids) = 1 AND p.status = 'succeeded'
			  AND p.job = CASE c.job WHEN 'load' THEN 'transform' ELSE 'extract' END
			  AND job_run_slot(p.id) = c.scheduled_at)`)
	assert.Zero(t, bad, "child runs that do not follow one successful parent run of their slot")
	assert.Positive(t, count(t, db, `SELECT count(*) FROM job_runs WHERE job = 'transform' AND trigger = 'recovery' AND status = 'succeeded'`),
		"the kill left a transform call in flight, which a recovery run made again")
	// Every slot of extract that succeeded before the end has its transform row, and every
	// transform slot that succeeded its load row: no slot lost through the kill.
	assert.Zero(t, count(t, db, `
		SELECT count(*) FROM job_runs p
		WHERE p.job IN ('extract', 'transform') AND p.status = 'succeeded' AND p.finished_at < now() - interval '5 seconds'
		  AND NOT EXISTS (SELECT 1 FROM job_runs c WHERE c.job = CASE p.job WHEN 'extract' THEN 'transform' ELSE 'load' END
		                  AND c.scheduled_at = job_run_slot(p.id))`), "parent slots that succeeded without a child row")
	// No child ran twice for one slot: each slot's calls carried one key, used for no other slot.
	rc.mu.Lock()
	defer rc.mu.Unlock()
	for _, job := range []string{"transform", "load"} {
		keyOfSlot, slotOfKey := map[string]string{}, map[string]string{}
		for _, c := range rc.calls[job] {
			if k, ok := keyOfSlot[c.slot]; ok {
				assert.Equal(t, k, c.key, "%s: slot %s was called with two keys", job, c.slot)
			}
			if s, ok := slotOfKey[c.key]; ok {
				assert.Equal(t, s, c.slot, "%s: key %s was used for two slots", job, c.key)
			}
			keyOfSlot[c.slot], slotOfKey[c.key] = c.key, c.slot
		}
	}
	assert.Zero(t, count(t, db, `SELECT count(*) FROM (SELECT 1 FROM job_runs WHERE job = 'load' AND status = 'succeeded'
		GROUP BY coalesce(scheduled_at, job_run_slot(id)) HAVING count(*) > 1) twice`), "a load slot that succeeded twice")
}

// awaitCount waits until the count query returns at least n.
func awaitCount(t *testing.T, db *testdb.DB, n int, sql string, args ...any) {
	t.Helper()
	require.Eventually(t, func() bool {
		var got int
		err := db.Pool.QueryRow(context.Background(), sql, args...).Scan(&got)
		return err == nil && got >= n
	}, testpace.Scaled(60*time.Second), 20*time.Millisecond, "%d rows of %s", n, sql)
}
