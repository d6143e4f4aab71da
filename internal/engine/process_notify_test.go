package engine

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schedulerhq/scheduler/internal/store"
	"github.com/schedulerhq/scheduler/internal/testdb"
)

// A job whose target fails notifies once per failed run and once when it recovers, through
// a SIGKILL of the leader among three real processes, the kill landing while a message is
// in flight: every message is signed; the message the dead leader sent is sent again under
// the same webhook-id with the same bytes; no webhook-id names two messages; and, counted by
// webhook-id as a deduplicating receiver counts, every failed run is in exactly one job.failed
// message and the first success after them in exactly one job.recovered message.
func TestNotificationsOncePerRunThroughALeaderKill(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real processes")
	}
	bin := buildScheduler(t, t.TempDir())
	db, url := testdb.Open(t, store.Options{InstanceID: "test"})
	ctx := context.Background()

	var broken atomic.Bool
	broken.Store(true)
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if broken.Load() {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	}))
	t.Cleanup(target.Close)
	h := &hook{arrived: make(chan heard, 1000)}
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.ServeHTTP(w, r)
		// The answer takes a moment, so that a leader killed on a message's arrival dies
		// before it records the message sent.
		time.Sleep(300 * time.Millisecond)
	}))
	t.Cleanup(slow.Close)

	createDefinition(t, db, `{"name": "flaky", "schedule": "@every 1s", "timeout": "5s", "retry": {"max_attempts": 1},
		"http": {"url": "`+target.URL+`", "timeout": "2s"},
		"notify": [{"on": ["failed", "recovered"], "webhook": {"url": "`+slow.URL+`/hook", "signing_secret": "HOOK_SIGNING"}}]}`)
	env := []string{"SCHEDULER_HTTP_ALLOW=127.0.0.1/32", "SCHEDULER_NOTIFY_INTERVAL=1s",
		"SCHEDULER_SECRET_HOOK_SIGNING=" + notifySecretValue, "SCHEDULER_JOB_ROUNDS_CLOSE_ENABLED=false"}
	procs := map[string]*process{}
	for _, id := range []string{"nt-a", "nt-b", "nt-c"} {
		procs[id] = startProcessIn(t, "", bin, url, id, env...)
	}

	first := awaitLeader(t, db, procs, 0)
	// Killed as a message arrives: its answer comes after the leader is gone.
	h.await(t, "job.failed", 60*time.Second)
	p := procs[first.InstanceID]
	require.NoError(t, p.cmd.Process.Signal(syscall.SIGKILL))
	_ = p.cmd.Wait()
	second := awaitLeader(t, db, procs, first.Epoch)
	require.Eventually(t, func() bool {
		return count(t, db, `SELECT count(*) FROM job_runs WHERE job = 'flaky' AND status = 'failed' AND epoch = $1`, second.Epoch) >= 3
	}, 60*time.Second, 50*time.Millisecond, "the new leader's runs fail too")
	broken.Store(false)
	h.await(t, "job.recovered", 60*time.Second)
	// Every failed run reaches the receiver (its messages are made an interval after it).
	var failed []int64
	require.Eventually(t, func() bool {
		failed = nil
		rows, err := db.Pool.Query(ctx, `SELECT id FROM job_runs WHERE job = 'flaky' AND status = 'failed' ORDER BY id`)
		require.NoError(t, err)
		for rows.Next() {
			var id int64
			require.NoError(t, rows.Scan(&id))
			failed = append(failed, id)
		}
		require.NoError(t, rows.Err())
		got := map[int64]bool{}
		for _, m := range h.all() {
			if m.msg.Type == "job.failed" {
				for _, id := range runIDs(m.msg) {
					got[id] = true
				}
			}
		}
		for _, id := range failed {
			if !got[id] {
				return false
			}
		}
		return true
	}, 60*time.Second, 100*time.Millisecond, "every failed run is notified")
	for _, p := range procs {
		if p.cmd.ProcessState == nil {
			require.NoError(t, p.cmd.Process.Signal(syscall.SIGTERM))
			_ = p.cmd.Wait()
		}
	}

	// As a receiver that deduplicates by webhook-id sees them.
	byID := map[string]heard{}
	repeated := 0
	for _, m := range h.all() {
		assert.True(t, validSignature(m), "message %s is signed", m.id)
		if prev, ok := byID[m.id]; ok {
			repeated++
			assert.True(t, bytes.Equal(prev.body, m.body), "webhook-id %s names one message: the same bytes every time", m.id)
			continue
		}
		byID[m.id] = m
	}
	assert.Positive(t, repeated, "the message in flight at the kill was sent again by the next leader")
	listed := map[string][]int64{}
	for _, m := range byID {
		for _, id := range runIDs(m.msg) {
			assert.NotContains(t, listed[m.msg.Type], id, "run %d is in two %s messages", id, m.msg.Type)
			listed[m.msg.Type] = append(listed[m.msg.Type], id)
		}
		assert.Equal(t, len(m.msg.Runs), m.msg.Count)
	}
	slices.Sort(listed["job.failed"])
	assert.Equal(t, failed, listed["job.failed"], "each failed run is in exactly one job.failed message")
	var recovered int64
	require.NoError(t, db.Pool.QueryRow(ctx, `
		SELECT min(id) FROM job_runs WHERE job = 'flaky' AND status = 'succeeded'
		AND id > (SELECT max(id) FROM job_runs WHERE job = 'flaky' AND status = 'failed')`).Scan(&recovered))
	assert.Equal(t, []int64{recovered}, listed["job.recovered"], "one job.recovered message, naming the first success")
	assert.Equal(t, len(failed), count(t, db, `SELECT count(*) FROM scheduler_notifications WHERE job = 'flaky' AND event = 'failed'`))
	assert.Equal(t, 1, count(t, db, `SELECT count(*) FROM scheduler_notifications WHERE job = 'flaky' AND event = 'recovered'`))
}
