package engine

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schedulerhq/scheduler/internal/store"
	"github.com/schedulerhq/scheduler/internal/store/storetest"
	"github.com/schedulerhq/scheduler/internal/testdb"
)

// blockingTarget holds every call until the call's context ends or the test releases them.
type blockingTarget struct {
	release   chan struct{}
	calls     atomic.Int64
	abandoned atomic.Int64 // calls whose context ended first: the scheduler cancelled them
}

func newBlockingTarget(t *testing.T) (*blockingTarget, *httptest.Server) {
	bt := &blockingTarget{release: make(chan struct{})}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		bt.calls.Add(1)
		select {
		case <-bt.release:
		case <-r.Context().Done():
			bt.abandoned.Add(1)
		case <-time.After(waitTimeout):
		}
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() {
		select {
		case <-bt.release:
		default:
			close(bt.release)
		}
	})
	return bt, srv
}

// activeSampler samples a job's queued and running runs in job_runs and keeps the most seen.
type activeSampler struct {
	t   *testing.T
	db  *testdb.DB
	job string
	max int
}

func (s *activeSampler) sample() int {
	n := count(s.t, s.db, `SELECT count(*) FROM job_runs WHERE job = $1 AND status IN ('queued', 'running')`, s.job)
	s.max = max(s.max, n)
	return n
}

// overlap allow with max_concurrent 3 on "@every 1s", against a target that holds every
// call: three runs at once, never four at any sampled instant, the slots past them skipped
// (overlap), manual triggers answered with an active run; the database refuses a fourth
// running row written directly.
func TestAllowRunsUpToMaxConcurrentAtOnce(t *testing.T) {
	db, url := newDB(t)
	bt, srv := newBlockingTarget(t)
	n := startNode(t, url, "a", nodeOptions{runtime: runtimeFor(t, "127.0.0.1/32"), pollInterval: 200 * time.Millisecond})
	awaitSignal(t, &n.en.testSignals.leading, "leading")
	createDefinition(t, db, `{"name": "fan", "schedule": "@every 1s", "overlap": "allow", "max_concurrent": 3,
		"timeout": "30s", "http": {"url": "`+srv.URL+`", "timeout": "30s"}}`)

	s := &activeSampler{t: t, db: db, job: "fan"}
	require.Eventually(t, func() bool {
		s.sample()
		return count(t, db, `SELECT count(*) FROM job_runs WHERE job = 'fan' AND status = 'skipped' AND reason = 'overlap'`) >= 2
	}, waitTimeout, 10*time.Millisecond, "slots past the third are skipped")
	for range 5 { // triggers while full: none queues a fourth run
		run, created, err := db.QueueManualRun(context.Background(), "fan", nil, []byte(`{}`))
		require.NoError(t, err)
		assert.False(t, created)
		assert.Equal(t, "fan", run.Job)
		s.sample()
	}
	assert.Equal(t, 3, s.sample(), "three runs at once")
	assert.Equal(t, 3, s.max, "never four at a sampled instant")
	assert.Equal(t, int64(3), bt.calls.Load(), "three calls held by the target")
	_, err := storetest.InsertRuns(context.Background(), db.Pool, storetest.RunOpts{Job: "fan", Status: store.StatusRunning, StartedAt: time.Now()})
	require.Error(t, err, "the database refuses a fourth running run")
	assert.Contains(t, err.Error(), "more queued or running runs than its bound")

	close(bt.release)
	require.Eventually(t, func() bool {
		s.sample()
		return count(t, db, `SELECT count(*) FROM job_runs WHERE job = 'fan' AND status = 'succeeded'`) >= 5
	}, waitTimeout, 10*time.Millisecond, "the held runs end and later slots run")
	assert.LessOrEqual(t, s.max, 3)
}

// overlap replace on "@every 1s", against a target that holds every call until it is
// cancelled: each slot cancels the running run (its call is abandoned, it ends cancelled) and
// then runs; never two runs active at any sampled instant. (A slot that comes while another
// waits for the replaced run to stop is skipped, so on a loaded machine some may be.)
func TestReplaceCancelsTheRunningRunAndStartsTheSlot(t *testing.T) {
	db, url := newDB(t)
	bt, srv := newBlockingTarget(t)
	n := startNode(t, url, "a", nodeOptions{runtime: runtimeFor(t, "127.0.0.1/32"), pollInterval: 200 * time.Millisecond})
	awaitSignal(t, &n.en.testSignals.leading, "leading")
	createDefinition(t, db, `{"name": "swap", "schedule": "@every 1s", "overlap": "replace",
		"timeout": "30s", "http": {"url": "`+srv.URL+`", "timeout": "30s"}}`)

	s := &activeSampler{t: t, db: db, job: "swap"}
	require.Eventually(t, func() bool {
		s.sample()
		return count(t, db, `SELECT count(*) FROM job_runs WHERE job = 'swap' AND status = 'cancelled'`) >= 3
	}, waitTimeout, 10*time.Millisecond, "three runs replaced")
	assert.Equal(t, 1, s.max, "never two runs active at a sampled instant")
	assert.GreaterOrEqual(t, bt.abandoned.Load(), int64(3), "the replaced runs' calls were cancelled")
	// Every replaced run is followed by its replacement, a later slot that started (the last
	// one's within a moment of its end).
	require.Eventually(t, func() bool {
		s.sample()
		return count(t, db, `SELECT count(*) FROM job_runs c WHERE c.job = 'swap' AND c.status = 'cancelled'
			AND NOT EXISTS (SELECT 1 FROM job_runs r WHERE r.job = 'swap' AND r.scheduled_at > c.scheduled_at AND r.started_at IS NOT NULL)`) == 0
	}, waitTimeout, 10*time.Millisecond, "each replaced run's slot successor started")
	assert.Equal(t, 1, s.max, "never two runs active at a sampled instant")
}

// overlap replace of a callback run its target accepted: the next slot ends it cancelled at
// once and runs; the target's late completion is refused (409), and the run stays cancelled.
func TestReplaceEndsAnAcceptedCallbackRun(t *testing.T) {
	db, url := newDB(t)
	var mu sync.Mutex
	tokens := map[string]string{} // run id → its callback token
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		tokens[r.Header.Get("X-Scheduler-Run-Id")] = r.Header.Get("X-Scheduler-Callback-Token")
		mu.Unlock()
		w.WriteHeader(http.StatusAccepted)
	}))
	t.Cleanup(srv.Close)
	n := startNode(t, url, "a", nodeOptions{runtime: runtimeFor(t, "127.0.0.1/32"), pollInterval: 200 * time.Millisecond})
	awaitSignal(t, &n.en.testSignals.leading, "leading")
	createDefinition(t, db, `{"name": "cb", "schedule": "@every 1s", "overlap": "replace", "timeout": "1h",
		"http": {"url": "`+srv.URL+`", "completion": "callback", "heartbeat_timeout": "1h"}}`)

	s := &activeSampler{t: t, db: db, job: "cb"}
	var replaced store.Run
	require.Eventually(t, func() bool {
		s.sample()
		err := db.Pool.QueryRow(context.Background(), `SELECT id FROM job_runs WHERE job = 'cb' AND status = 'cancelled'
			AND callback_accepted_at IS NOT NULL ORDER BY id LIMIT 1`).Scan(&replaced.ID)
		return err == nil
	}, waitTimeout, 10*time.Millisecond, "an accepted callback run replaced")
	assert.Equal(t, 1, s.max, "never two runs active at a sampled instant")
	r := getRun(t, db, replaced.ID)
	require.NotNil(t, r.Error)
	assert.Contains(t, *r.Error, "replaced by the slot")

	mu.Lock()
	token := tokens[strconv.FormatInt(replaced.ID, 10)]
	mu.Unlock()
	require.NotEmpty(t, token)
	out, _, err := db.CompleteCallback(context.Background(), store.Completion{RunID: replaced.ID,
		TokenHash: store.CallbackTokenHash(token), Status: store.StatusSucceeded}, func(store.Executor, store.Ended) error { return nil })
	require.NoError(t, err)
	assert.Equal(t, store.CallbackConflict, out, "its late completion conflicts (409)")
	assert.Equal(t, store.StatusCancelled, getRun(t, db, replaced.ID).Status)
}
