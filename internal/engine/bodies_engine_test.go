package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schedulerhq/scheduler/internal/config"
	"github.com/schedulerhq/scheduler/internal/metrics"
	"github.com/schedulerhq/scheduler/internal/store"
	"github.com/schedulerhq/scheduler/internal/testdb"
	"github.com/schedulerhq/scheduler/internal/testmetrics"
)

// counts is the gate's state: bodies running, and runs waiting for a place.
func (g *Gate) counts() (running, waiting int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.running, g.waiting
}

// hangingServer answers no request until the test ends; most is the most requests it held
// at once.
func hangingServer(t *testing.T) (srv *httptest.Server, most *atomic.Int64) {
	hang := make(chan struct{})
	var holding atomic.Int64
	most = &atomic.Int64{}
	srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := holding.Add(1)
		defer holding.Add(-1)
		for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
		}
		select {
		case <-hang:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(hang) }) // before Close, which waits for the requests
	return srv, most
}

// defineIn stores the runtime job js in namespace ns, as the API does.
func defineIn(t *testing.T, db *testdb.DB, js string) {
	t.Helper()
	j := checkDefinition(t, js)
	b, err := json.Marshal(j.Def)
	require.NoError(t, err)
	_, err = db.CreateDefinition(context.Background(), j.Def.Key(), j.Def.Kind(), b, 10_000)
	require.NoError(t, err)
}

// The attack: a namespace defines more jobs than the replica's bound, all calling a target
// that never answers, every second. Three namespaces share a bound of 8: the hanging one
// holds at most its share (4) of the run bodies, and every job of the other two keeps
// running and succeeding beside it.
func TestHangingNamespaceHoldsOnlyItsShareOfRunBodies(t *testing.T) {
	db, url := newDB(t)
	slow, most := hangingServer(t)
	quick := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	t.Cleanup(quick.Close)
	_, err := db.Pool.Exec(context.Background(), `INSERT INTO scheduler_namespaces (name) VALUES ('hung'), ('team-a'), ('team-b')`)
	require.NoError(t, err)
	for i := range 12 {
		defineIn(t, db, fmt.Sprintf(`{"name": "hang-%d", "namespace": "hung", "schedule": "@every 1s", "timeout": "5m", "http": {"url": %q}}`, i, slow.URL))
	}
	for _, ns := range []string{"team-a", "team-b"} {
		for i := range 3 {
			defineIn(t, db, fmt.Sprintf(`{"name": "work-%d", "namespace": %q, "schedule": "@every 1s", "http": {"url": %q}}`, i, ns, quick.URL))
		}
	}
	gate := NewGate(8, nil)
	n := startNode(t, url, "a", nodeOptions{runtime: runtimeFor(t, "127.0.0.1/32"), gate: gate})
	awaitSignal(t, &n.en.testSignals.leading, "leading")

	// Every job of the two teams succeeds 5 times, the later ones while the hanging
	// namespace's runs (5 minutes of timeout) fill its share.
	const perJob = 5
	for {
		var jobs, least int
		require.NoError(t, db.Pool.QueryRow(context.Background(), `
			SELECT count(*), coalesce(min(ok), 0) FROM (
				SELECT job, count(*) FILTER (WHERE status = 'succeeded') AS ok FROM job_runs
				WHERE job LIKE 'team-%' GROUP BY job) j`).Scan(&jobs, &least))
		if jobs == 6 && least >= perJob {
			break
		}
		awaitSignal(t, &n.en.testSignals.finished, fmt.Sprintf("the teams' runs finishing (%d jobs, the least run %d times)", jobs, least))
	}
	assert.Equal(t, int64(4), most.Load(), "the hanging namespace held its share of the bound, 4 of 8, no more")
	assert.Greater(t, count(t, db, `SELECT count(*) FROM job_runs WHERE job LIKE 'hung/%' AND status = 'running'`), 4,
		"the hanging namespace's other runs are claimed and wait for a place")
}

// One gate serves every engine of a replica (one per partition it leads): a namespace's
// share is the replica's, whichever engines its runs come from. Two engines, each leading
// a database of its own, share a gate of 8; the hanging namespace has 12 jobs in each and
// holds 4 bodies in all, and the other namespace's jobs, on the second engine, keep
// running.
func TestEnginesSharingAGateShareOneBound(t *testing.T) {
	slow, most := hangingServer(t)
	quick := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	t.Cleanup(quick.Close)
	gate := NewGate(8, nil)
	var second *testdb.DB
	var n *node
	for i, id := range []string{"a", "b"} {
		db, url := newDB(t)
		_, err := db.Pool.Exec(context.Background(), `INSERT INTO scheduler_namespaces (name) VALUES ('hung'), ('team-a')`)
		require.NoError(t, err)
		for j := range 12 {
			defineIn(t, db, fmt.Sprintf(`{"name": "hang-%d", "namespace": "hung", "schedule": "@every 1s", "timeout": "5m", "http": {"url": %q}}`, j, slow.URL))
		}
		if i == 1 {
			for j := range 3 {
				defineIn(t, db, fmt.Sprintf(`{"name": "work-%d", "namespace": "team-a", "schedule": "@every 1s", "http": {"url": %q}}`, j, quick.URL))
			}
			second = db
		}
		n = startNode(t, url, id, nodeOptions{runtime: runtimeFor(t, "127.0.0.1/32"), gate: gate})
		awaitSignal(t, &n.en.testSignals.leading, "leading")
	}
	for {
		var jobs, least int
		require.NoError(t, second.Pool.QueryRow(context.Background(), `
			SELECT count(*), coalesce(min(ok), 0) FROM (
				SELECT job, count(*) FILTER (WHERE status = 'succeeded') AS ok FROM job_runs
				WHERE job LIKE 'team-a/%' GROUP BY job) j`).Scan(&jobs, &least))
		if jobs == 3 && least >= 5 {
			break
		}
		awaitSignal(t, &n.en.testSignals.finished, fmt.Sprintf("team-a's runs finishing (%d jobs, the least run %d times)", jobs, least))
	}
	assert.Equal(t, int64(4), most.Load(), "the hanging namespace held its share of the replica's bound across both engines")
}

// A slot of 2 000 jobs costs the bound's goroutines, not 2 000: the runs beyond it wait as
// values in the gate. The target never answers, so every body holds its place while the
// goroutines are counted.
func TestRunsOfOneSlotWaitWithoutGoroutines(t *testing.T) {
	const jobs, bound = 2000, 16
	db, url := newDB(t)
	slow, _ := hangingServer(t)
	// One slot for every job, far enough ahead for the node to start and load them.
	var now time.Time
	require.NoError(t, db.Pool.QueryRow(context.Background(), `SELECT now()`).Scan(&now))
	slot := now.Truncate(time.Second).Add(bulkSlotLead())
	def := checkDefinition(t, fmt.Sprintf(`{"name": "x", "schedule": "* * * * * *", "start_at": %q, "max_runs": 1, "timeout": "5m", "http": {"url": %q}}`,
		slot.Format(time.RFC3339), slow.URL))
	b, err := json.Marshal(def.Def)
	require.NoError(t, err)
	_, err = db.Pool.Exec(context.Background(), `
		INSERT INTO job_definitions (name, kind, definition)
		SELECT 'bulk-' || i, 'http', jsonb_set($1::jsonb, '{name}', to_jsonb('bulk-' || i)) FROM generate_series(1, $2) i`,
		string(b), jobs)
	require.NoError(t, err)
	runtime.GC()
	before := runtime.NumGoroutine()
	m := metrics.New()
	gate := NewGate(bound, m)
	n := startNode(t, url, "a", nodeOptions{runtime: runtimeFor(t, "127.0.0.1/32"), gate: gate})
	awaitSignal(t, &n.en.testSignals.leading, "leading")
	require.True(t, time.Now().Before(slot), "the node led only after the slot %s: raise the lead", slot)

	// The claims' signal comes before their runs reach the gate, and none follows the last
	// one (the jobs are spent): the gate is watched until its deadline.
	require.Eventually(t, func() bool {
		running, waiting := gate.counts()
		return running+waiting == jobs
	}, time.Until(slot)+waitTimeout, 20*time.Millisecond, "the slot's %d runs reaching the gate", jobs)
	running, waiting := gate.counts()
	assert.Equal(t, bound/2, running, "one namespace's runs hold its share of the bound")
	assert.Equal(t, jobs-bound/2, waiting)
	scraped := testmetrics.Scrape(t, m)
	assert.Equal(t, float64(jobs-bound/2), testmetrics.Series(scraped, "scheduler_run_bodies_waiting", nil).GetGauge().GetValue())
	assert.Equal(t, float64(bound/2), testmetrics.Series(scraped, "scheduler_run_bodies_running", nil).GetGauge().GetValue())
	// The ticks that claimed the slot end once their claims are answered; the count is
	// taken at its lowest within a second, past them.
	least := runtime.NumGoroutine()
	for end := time.Now().Add(time.Second); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		least = min(least, runtime.NumGoroutine())
	}
	var mem runtime.MemStats
	runtime.ReadMemStats(&mem)
	t.Logf("goroutines: %d before the node, %d with %d runs of one slot claimed (%d running, %d waiting); stacks in use %d KiB",
		before, least, jobs, running, waiting, mem.StackInuse>>10)
	assert.Less(t, least-before, 300, "the node's goroutines beyond the bound's (the node itself, the calls' connections)")
}

// bulkSlotLead is how far ahead of the node's start the slot of TestRunsOfOneSlotWaitWithoutGoroutines
// lies: the node must start and load 2 000 definitions before it.
func bulkSlotLead() time.Duration { return max(8*time.Second, waitTimeout/2) }

// A run's timeout counts from when its body begins, not from its claim: two jobs of one
// namespace share one place (a gate of 2), each call hangs until its run's 2 s timeout, so
// each run waits for the other's; the call of a run that waited still has about its whole
// timeout.
func TestWaitingRunHasItsWholeTimeoutFromItsPlace(t *testing.T) {
	db, url := newDB(t)
	type call struct {
		run        string
		start, end time.Time
	}
	calls := make(chan call, 100)
	hanging := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c := call{run: r.Header.Get("X-Scheduler-Run-Id"), start: time.Now()}
		<-r.Context().Done() // the run's timeout ends the call
		c.end = time.Now()
		calls <- c
	}))
	t.Cleanup(hanging.Close)
	for _, name := range []string{"one", "two"} {
		defineIn(t, db, fmt.Sprintf(`{"name": %q, "schedule": "@every 1s", "timeout": "2s", "http": {"url": %q}}`, name, hanging.URL))
	}
	n := startNode(t, url, "a", nodeOptions{runtime: runtimeFor(t, "127.0.0.1/32"), gate: NewGate(2, nil)})
	awaitSignal(t, &n.en.testSignals.leading, "leading")
	for {
		var c call
		select {
		case c = <-calls:
		case <-time.After(waitTimeout):
			t.Fatal("no call ended")
		}
		var startedAt time.Time // the claim's
		require.NoError(t, db.Pool.QueryRow(context.Background(), `SELECT started_at FROM job_runs WHERE id = $1::bigint`, c.run).Scan(&startedAt))
		if c.start.Sub(startedAt) < time.Second {
			continue // a run that found its place at once
		}
		assert.GreaterOrEqual(t, c.end.Sub(c.start), 1500*time.Millisecond,
			"run %s waited %s for its place and still had its timeout of 2s for its call", c.run, c.start.Sub(startedAt))
		awaitStatus(t, db, mustID(t, c.run), "timed_out")
		return
	}
}

func mustID(t *testing.T, s string) int64 {
	t.Helper()
	var id int64
	_, err := fmt.Sscan(s, &id)
	require.NoError(t, err)
	return id
}

// A cancel request reaches a run that waits for a place: it ends cancelled at once, its
// body never begun, while the run holding the place goes on.
func TestCancelledWaitingRunEndsWithoutItsBody(t *testing.T) {
	db, url := newDB(t)
	gate := NewGate(2, nil) // the built-in jobs' share is one place, which slow holds
	n := startNode(t, url, "a", nodeOptions{jobs: []config.Job{jobConfig(t, "slow", "@every 1s", time.Hour), jobConfig(t, "tick", "@every 1s", time.Minute)},
		gate: gate})
	awaitSignal(t, &n.en.testSignals.leading, "leading")
	for _, waiting := gate.counts(); waiting == 0; _, waiting = gate.counts() {
		awaitSignal(t, &n.en.testSignals.claimBatch, "a batch of claims")
	}
	// tick's one running run (its later slots overlap it) is the one waiting.
	var id int64
	require.NoError(t, db.Pool.QueryRow(context.Background(), `SELECT id FROM job_runs WHERE job = 'tick' AND status = 'running'`).Scan(&id))
	_, outcome, err := db.CancelRun(context.Background(), id)
	require.NoError(t, err)
	require.Equal(t, store.CancelRequested, outcome)
	run := awaitFinished(t, db, id)
	assert.Equal(t, store.StatusCancelled, run.Status)
	require.NotNil(t, run.Error)
	assert.Contains(t, *run.Error, "before its body began")
	assert.Zero(t, count(t, db, `SELECT count(*) FROM test_calls WHERE run_id = $1`, id), "its body never began")
	assert.Equal(t, 1, count(t, db, `SELECT count(*) FROM job_runs WHERE job = 'slow' AND status = 'running'`), "the run holding the place goes on")
}

// A term that ends while runs wait for a place ends them as runs whose body never began:
// left running, without a call, for the next leader's recovery, never recorded succeeded.
func TestTermEndingLeavesWaitingRunsToTheNextLeader(t *testing.T) {
	db, url := newDB(t)
	// Two places: one for the built-in jobs (their share), held by slow; tick waits.
	gate := NewGate(2, nil)
	n := startNode(t, url, "a", nodeOptions{jobs: []config.Job{jobConfig(t, "slow", "@every 1s", time.Hour), jobConfig(t, "tick", "@every 1s", time.Minute)},
		gate: gate})
	awaitSignal(t, &n.en.testSignals.leading, "leading")
	for _, waiting := gate.counts(); waiting == 0; _, waiting = gate.counts() {
		awaitSignal(t, &n.en.testSignals.claimBatch, "a batch of claims")
	}
	n.stop()
	// tick may have run before slow took the built-in jobs' place; every succeeded run of
	// it must have run its body.
	assert.Zero(t, count(t, db, `SELECT count(*) FROM job_runs r WHERE job = 'tick' AND status = 'succeeded'
		AND NOT EXISTS (SELECT FROM test_calls c WHERE c.run_id = r.id)`), "a run whose body never began is not succeeded")
	assert.Positive(t, count(t, db, `SELECT count(*) FROM job_runs WHERE job = 'tick' AND status = 'running'`),
		"the waiting run is left running, for the next leader to recover")
	assert.Zero(t, count(t, db, `SELECT count(*) FROM test_calls c JOIN job_runs r ON r.id = c.run_id
		WHERE r.job = 'tick' AND r.status = 'running'`), "the waiting run's body never began")
}
