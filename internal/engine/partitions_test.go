package engine

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schedulerhq/scheduler/internal/config"
	"github.com/schedulerhq/scheduler/internal/jobcontract"
	"github.com/schedulerhq/scheduler/internal/leader"
	"github.com/schedulerhq/scheduler/internal/metrics"
	"github.com/schedulerhq/scheduler/internal/pglisten"
	"github.com/schedulerhq/scheduler/internal/runtimejob"
	"github.com/schedulerhq/scheduler/internal/store"
	"github.com/schedulerhq/scheduler/internal/store/storetest"
	"github.com/schedulerhq/scheduler/internal/testdb"
	"github.com/schedulerhq/scheduler/internal/testmetrics"
)

// partitionEngine starts, on its own pool, the engine of partition p leading the term of
// fence (storetest.ElectPartition), as a replica holding that partition runs it; its queue
// and definitions are polled every 200 ms, or every poll given.
func partitionEngine(t *testing.T, url, id string, fence store.Fence, rt *runtimejob.Runtime, poll ...time.Duration) *Engine {
	t.Helper()
	en, _ := partitionEngineTerm(t, url, id, fence, rt, poll...)
	return en
}

// partitionEngineTerm is partitionEngine, and how to end the engine's term while it runs.
func partitionEngineTerm(t *testing.T, url, id string, fence store.Fence, rt *runtimejob.Runtime, poll ...time.Duration) (*Engine, context.CancelFunc) {
	t.Helper()
	db := testdb.Connect(t, url, store.Options{InstanceID: id})
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: logLevel()}))
	notes := pglisten.New(db.DB, log)
	en, err := New(Config{Partition: fence.Partition, DB: db.DB, Notifier: notes, Registry: jobcontract.NewRegistry(),
		InstanceID: id, Log: log, PollInterval: append(poll, 200*time.Millisecond)[0], RescueInterval: 200 * time.Millisecond, Runtime: rt})
	require.NoError(t, err)
	en.testSignals.init()
	ctx, cancel := context.WithCancel(context.Background())
	termCtx, endTerm := context.WithCancel(ctx)
	terms := make(chan leader.Term, 1)
	terms <- leader.Term{Partition: fence.Partition, Epoch: fence.Epoch, TermID: fence.TermID, Since: time.Now(), Ctx: termCtx}
	var wg sync.WaitGroup
	wg.Go(func() { notes.Run(ctx) })
	wg.Go(func() { en.Run(ctx, terms) })
	t.Cleanup(func() {
		cancel()
		done := make(chan struct{})
		go func() { wg.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(waitTimeout):
			t.Errorf("the engine of partition %d did not stop within %s", fence.Partition, waitTimeout)
		}
	})
	return en, endTerm
}

// jobsOf returns n job names that hash onto partition p of a cluster of partitions.
func jobsOf(t *testing.T, db *testdb.DB, partitions, p, n int) []string {
	t.Helper()
	rows, err := db.Pool.Query(context.Background(), `
		SELECT name FROM (SELECT 'job-' || i AS name, i FROM generate_series(1, 1000) AS i) AS c
		WHERE scheduler_partition_of(name, $1) = $2 ORDER BY i LIMIT $3`, partitions, p, n)
	require.NoError(t, err)
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	require.Len(t, names, n)
	return names
}

// clusterWithJob makes a cluster of 3 partitions with one runtime job of partition p on
// spec, calling got's server.
func clusterWithJob(t *testing.T, p int, spec string) (db *testdb.DB, url string, got *calls, job string) {
	t.Helper()
	db, url = newDB(t)
	storetest.Cluster(context.Background(), t, db.Pool, 3)
	got, srv := callsServer(t)
	job = jobsOf(t, db, 3, p, 1)[0]
	defineJob(t, db, srv, job, spec, p)
	return db, url, got, job
}

// calls is a target that counts its calls by path (the job's name).
type calls struct {
	mu sync.Mutex
	n  map[string]int
}

func callsServer(t *testing.T) (*calls, *httptest.Server) {
	c := &calls{n: map[string]int{}}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c.mu.Lock()
		c.n[strings.TrimPrefix(r.URL.Path, "/")]++
		c.mu.Unlock()
	}))
	t.Cleanup(srv.Close)
	return c, srv
}

func (c *calls) of(job string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[job]
}

// defineJob stores a runtime job calling srv at /<name>, as the API does, and checks that
// it was placed in partition p.
func defineJob(t *testing.T, db *testdb.DB, srv *httptest.Server, name, schedule string, p int) {
	t.Helper()
	createDefinition(t, db, `{"name": "`+name+`", "schedule": "`+schedule+`", "http": {"url": "`+srv.URL+`/`+name+`"}}`)
	sd, err := db.Definition(context.Background(), name)
	require.NoError(t, err)
	require.Equal(t, p, sd.Partition, "%s is stored in its hash's partition", name)
}

// Three engines on one database, the coordinator's (partition 0, elected as today) and
// those of partitions 1 and 2, each claim only their own jobs' slots, and a manual run of a
// job of partition 2 is run by partition 2's engine only.
func TestPartitionEnginesRunOnlyTheirOwnJobs(t *testing.T) {
	db, url := newDB(t)
	ctx := context.Background()
	storetest.Cluster(ctx, t, db.Pool, 3)
	got, srv := callsServer(t)
	own := map[int][]string{0: jobsOf(t, db, 3, 0, 1), 1: jobsOf(t, db, 3, 1, 2), 2: jobsOf(t, db, 3, 2, 3)}
	for p, names := range own {
		for _, name := range names[:min(2, len(names))] {
			defineJob(t, db, srv, name, "@every 1s", p)
		}
	}
	manual := own[2][2]
	defineJob(t, db, srv, manual, "0 0 1 1 *", 2)

	rt := runtimeFor(t, "127.0.0.1/32")
	startNode(t, url, "e0", nodeOptions{runtime: rt})
	partitionEngine(t, url, "e1", storetest.ElectPartition(ctx, t, db.Pool, 1, "e1"), rt)
	partitionEngine(t, url, "e2", storetest.ElectPartition(ctx, t, db.Pool, 2, "e2"), rt)

	for _, name := range append(append(own[0], own[1]...), own[2][:2]...) {
		require.Eventually(t, func() bool {
			return count(t, db, `SELECT count(*) FROM job_runs WHERE job = $1 AND status = 'succeeded'`, name) >= 2
		}, waitTimeout, 20*time.Millisecond, "%s's slots run", name)
	}
	run, created, err := db.QueueManualRun(ctx, manual, nil, []byte(`{}`))
	require.NoError(t, err)
	require.True(t, created)
	r := awaitFinished(t, db, run.ID)
	assert.Equal(t, store.StatusSucceeded, r.Status)
	require.NotNil(t, r.InstanceID)
	assert.Equal(t, "e2", *r.InstanceID, "partition 2's engine ran the manual run of its job")
	assert.Equal(t, 1, got.of(manual))

	for p, names := range own {
		wrong := count(t, db, `SELECT count(*) FROM job_runs
			WHERE job = ANY($1) AND (partition_id <> $2 OR instance_id IS DISTINCT FROM 'e' || $2)`, names, p)
		assert.Zero(t, wrong, "every run of partition %d's jobs is its engine's, in its partition", p)
	}
}

// A write under a partition's replaced term fails with store.ErrNotLeader: the engine that
// still believes it leads partition 1 starts no queued run of it once another replica was
// elected there, and its fence is refused.
func TestPartitionTermReplacedWritesNothing(t *testing.T) {
	db, url, got, job := clusterWithJob(t, 1, "0 0 1 1 *")
	ctx := context.Background()
	old := storetest.ElectPartition(ctx, t, db.Pool, 1, "e1")
	en := partitionEngine(t, url, "e1", old, runtimeFor(t, "127.0.0.1/32"))
	awaitSignal(t, &en.testSignals.leading, "partition 1 led")

	// Before the new election the term runs its queued runs.
	run, _, err := db.QueueManualRun(ctx, job, nil, []byte(`{}`))
	require.NoError(t, err)
	assert.Equal(t, store.StatusSucceeded, awaitFinished(t, db, run.ID).Status)

	storetest.ElectPartition(ctx, t, db.Pool, 1, "e2")
	run, _, err = db.QueueManualRun(ctx, job, nil, []byte(`{}`))
	require.NoError(t, err)
	// A pass that starts after the run was queued, and the start of the next one, so the
	// first has tried to pick it.
	drain(en.testSignals.queuePass.C()) // notify_flood_test.go's
	awaitSignal(t, &en.testSignals.queuePass, "a queue pass")
	awaitSignal(t, &en.testSignals.queuePass, "the next queue pass")
	assert.Equal(t, store.StatusQueued, getRun(t, db, run.ID).Status, "the replaced term did not start the run")
	assert.Equal(t, 1, got.of(job), "only the run of the term's time was called")

	err = db.Fenced(ctx, old, func(*store.Tx) error { return nil })
	require.ErrorIs(t, err, store.ErrNotLeader)
}

// The rescuer of partition 1 abandons the runs its partition's earlier terms left running,
// and never touches partition 2's: those belong to partition 2's terms, whose epochs count
// apart from partition 1's.
func TestPartitionRescuerLeavesOtherPartitionsRuns(t *testing.T) {
	db, url := newDB(t)
	ctx := context.Background()
	storetest.Cluster(ctx, t, db.Pool, 3)
	_, srv := callsServer(t)
	mine, theirs := jobsOf(t, db, 3, 1, 1)[0], jobsOf(t, db, 3, 2, 1)[0]
	defineJob(t, db, srv, mine, "0 0 1 1 *", 1)
	defineJob(t, db, srv, theirs, "0 0 1 1 *", 2)
	left := storetest.Runs(ctx, t, db.Pool,
		storetest.RunOpts{Job: mine, Status: store.StatusRunning, StartedAt: time.Now(), InstanceID: "dead", Epoch: storetest.Ptr(int64(7)), Partition: 1},
		storetest.RunOpts{Job: theirs, Status: store.StatusRunning, StartedAt: time.Now(), InstanceID: "alive", Epoch: storetest.Ptr(int64(7)), Partition: 2},
	)

	en := partitionEngine(t, url, "e1", storetest.ElectPartition(ctx, t, db.Pool, 1, "e1"), runtimeFor(t, "127.0.0.1/32"))
	assert.Equal(t, 1, awaitSignal(t, &en.testSignals.rescued, "the term's first rescue"), "one run abandoned")
	assert.Equal(t, 0, awaitSignal(t, &en.testSignals.rescued, "the next rescue"))
	assert.Equal(t, store.StatusAbandoned, getRun(t, db, left[0].ID).Status)
	assert.Equal(t, store.StatusRunning, getRun(t, db, left[1].ID).Status, "partition 2's run is left to partition 2")
	assert.Equal(t, 1, count(t, db, `SELECT count(*) FROM job_runs WHERE recovers_run_id = $1 AND partition_id = 1`, left[0].ID),
		"the recovery run is queued in partition 1")
	assert.Zero(t, count(t, db, `SELECT count(*) FROM job_runs WHERE recovers_run_id = $1`, left[1].ID))
}

// A partition's engine follows only its own jobs' definitions: a new job of partition 2,
// and a NOTIFY any login may send naming it, leave partition 1's engine without it, while a
// new job of partition 1 is loaded.
func TestPartitionEngineIgnoresOtherPartitionsDefinitions(t *testing.T) {
	db, url := newDB(t)
	ctx := context.Background()
	storetest.Cluster(ctx, t, db.Pool, 3)
	_, srv := callsServer(t)
	// No poll: the notifications alone drive the watch, in the order they were sent.
	en := partitionEngine(t, url, "e1", storetest.ElectPartition(ctx, t, db.Pool, 1, "e1"), runtimeFor(t, "127.0.0.1/32"), time.Hour)
	awaitSignal(t, &en.testSignals.leading, "partition 1 led")

	theirs, mine := jobsOf(t, db, 3, 2, 1)[0], jobsOf(t, db, 3, 1, 1)[0]
	defineJob(t, db, srv, theirs, "@every 1s", 2)
	_, err := db.Pool.Exec(ctx, `SELECT pg_notify($1, $2)`, store.DefinitionsChannel, theirs)
	require.NoError(t, err)
	defineJob(t, db, srv, mine, "@every 1s", 1)
	// The read that loaded partition 1's job has read every name notified before it.
	for en.entry(mine) == nil {
		awaitSignal(t, &en.testSignals.definitionsRead, "a read of the notified definitions")
	}
	assert.Nil(t, en.entry(theirs), "partition 2's job is not run by partition 1's engine")
}

// A partition moves between replicas: its engine forgets its runtime definitions as its
// term ends, so a replica does not keep the definitions of every partition it ever led (the
// first replica of a cluster leads them all until the others join). The next term loads
// them again.
func TestTermEndDropsItsDefinitions(t *testing.T) {
	db, url, _, job := clusterWithJob(t, 1, "0 0 1 1 *")
	ctx := context.Background()
	en, endTerm := partitionEngineTerm(t, url, "e1", storetest.ElectPartition(ctx, t, db.Pool, 1, "e1"), runtimeFor(t, "127.0.0.1/32"))
	awaitSignal(t, &en.testSignals.leading, "partition 1 led")
	require.NotNil(t, en.entry(job), "the term loaded its job")

	endTerm()
	awaitSignal(t, &en.testSignals.stopped, "the term's end")
	assert.Nil(t, en.entry(job), "the ended term's definitions are dropped")
	assert.Empty(t, en.CatchUpWindows())
}

// A job's pause gauge goes with its partition: the replica the partition left must not keep
// reporting the pause it saw last, which (the alert taking the largest value over the
// replicas) would silence SchedulerJobStuck after the job was resumed elsewhere. Another
// engine's job keeps its gauge.
func TestTermEndForgetsItsJobsPauseGauges(t *testing.T) {
	t.Parallel()
	m := metrics.New()
	e := &Engine{conf: Config{Metrics: m}, runtime: map[string]*entry{"team-a/report": {}}}
	m.SetJobPaused("team-a/report", true)
	m.SetJobPaused("team-b/other", true)

	e.dropDefinitions()
	scraped := testmetrics.Scrape(t, m)
	assert.Nil(t, testmetrics.Series(scraped, "scheduler_job_paused", map[string]string{"job_name": "team-a/report"}),
		"the ended term's job reports no pause here")
	other := testmetrics.Series(scraped, "scheduler_job_paused", map[string]string{"job_name": "team-b/other"})
	require.NotNil(t, other)
	assert.Equal(t, 1.0, other.GetGauge().GetValue())
}

// An engine of a partition other than 0 refuses the built-in jobs (they are the
// coordinator's), and a partition outside 0..1023 is refused, each with what to do.
func TestPartitionEngineConfigIsChecked(t *testing.T) {
	db, _ := newDB(t)
	notes := pglisten.New(db.DB, slog.Default())
	conf := Config{DB: db.DB, Notifier: notes, Registry: registry, InstanceID: "e",
		PollInterval: time.Second, Jobs: []config.Job{jobConfig(t, "tick", "@every 1s", time.Minute)}}
	_, err := New(conf)
	require.NoError(t, err, "partition 0's engine runs the built-in jobs")
	conf.Partition = 1
	_, err = New(conf)
	require.ErrorContains(t, err, "they run on partition 0's engine only")
	conf.Jobs, conf.Partition = nil, 1024
	_, err = New(conf)
	require.ErrorContains(t, err, "must be from 0 to 1023")
}
