package engine

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"math"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/schedulerhq/scheduler/internal/config"
	"github.com/schedulerhq/scheduler/internal/jobcontract"
	"github.com/schedulerhq/scheduler/internal/jobs"
	"github.com/schedulerhq/scheduler/internal/leader"
	"github.com/schedulerhq/scheduler/internal/metrics"
	"github.com/schedulerhq/scheduler/internal/notify/deliver"
	"github.com/schedulerhq/scheduler/internal/pglisten"
	"github.com/schedulerhq/scheduler/internal/runtimejob"
	"github.com/schedulerhq/scheduler/internal/schedule"
	"github.com/schedulerhq/scheduler/internal/store"
	"github.com/schedulerhq/scheduler/internal/store/storetest"
	"github.com/schedulerhq/scheduler/internal/testdb"
	"github.com/schedulerhq/scheduler/internal/testpace"
	"github.com/schedulerhq/scheduler/internal/testsignal"
)

func TestMain(m *testing.M) { testdb.Main(m) }

// waitTimeout bounds a wait for the engine: 15 s on an idle machine, stretched by the
// machine's pace when the package's tests start (internal/testpace), as other work on the
// same cores slows the engine's processes as much as the test.
var waitTimeout = testpace.Scaled(15 * time.Second)

// The test jobs. Each records what it did in test_calls through env.Tx, so every call is
// a fenced write stamped with the epoch it committed under and its clock_timestamp().

// recordJob records one call and returns.
type recordJob struct{ name string }

func (j recordJob) Name() string { return j.name }
func (j recordJob) Defaults() jobcontract.Defaults {
	return jobcontract.Defaults{Schedule: "@every 1s", Timeout: time.Minute}
}
func (j recordJob) Run(ctx context.Context, env *jobcontract.Env) (jobcontract.Stats, error) {
	return jobcontract.Stats{Processed: 1, Changed: 1}, recordCall(ctx, env)
}

// blockJob records its start, then waits for its context and returns its error.
type blockJob struct{ name string }

func (j blockJob) Name() string { return j.name }
func (j blockJob) Defaults() jobcontract.Defaults {
	return jobcontract.Defaults{Schedule: "@every 1s", Timeout: time.Minute}
}
func (j blockJob) Run(ctx context.Context, env *jobcontract.Env) (jobcontract.Stats, error) {
	if err := recordCall(ctx, env); err != nil {
		return jobcontract.Stats{}, err
	}
	<-ctx.Done()
	return jobcontract.Stats{}, ctx.Err()
}

// panicJob panics.
type panicJob struct{ name string }

func (j panicJob) Name() string { return j.name }
func (j panicJob) Defaults() jobcontract.Defaults {
	return jobcontract.Defaults{Schedule: "@every 1s", Timeout: time.Minute}
}
func (j panicJob) Run(context.Context, *jobcontract.Env) (jobcontract.Stats, error) {
	panic("boom: the job body blew up")
}

// walkPanicJob walks 30 numbers, two batches at once, and panics (a nil-map write) in the
// Apply of batch 2, on one of the walk's goroutines rather than the job body's.
type walkPanicJob struct{ name string }

func (j walkPanicJob) Name() string { return j.name }
func (j walkPanicJob) Defaults() jobcontract.Defaults {
	return jobcontract.Defaults{Schedule: "@every 1s", Timeout: time.Minute}
}
func (j walkPanicJob) Run(ctx context.Context, env *jobcontract.Env) (jobcontract.Stats, error) {
	type number struct{ N int64 }
	return (&jobcontract.Walk[number]{
		Job: j.name, BatchSize: 10, Parallel: 2,
		Read:   `SELECT n FROM generate_series(@after::bigint + 1, 30) AS n ORDER BY n LIMIT @limit`,
		Start:  pgx.NamedArgs{"after": int64(0)},
		Keyset: func(n number) pgx.NamedArgs { return pgx.NamedArgs{"after": n.N} },
		Lock:   func(n number) int64 { return n.N },
		Apply: func(_ context.Context, b *jobcontract.Batch[number]) error {
			if b.N == 2 {
				var perBatch map[int]int
				//lint:ignore SA5000 the panic this job exists for
				perBatch[b.N]++
			}
			return nil
		},
	}).Run(ctx, env)
}

// writerJob writes one row every few milliseconds, each in its own fenced transaction,
// until its context ends or a write fails.
type writerJob struct{ name string }

func (j writerJob) Name() string { return j.name }
func (j writerJob) Defaults() jobcontract.Defaults {
	return jobcontract.Defaults{Schedule: "@every 1s", Timeout: time.Minute}
}
func (j writerJob) Run(ctx context.Context, env *jobcontract.Env) (jobcontract.Stats, error) {
	var stats jobcontract.Stats
	for {
		if err := recordCall(ctx, env); err != nil {
			return stats, err
		}
		stats.Changed++
		select {
		case <-ctx.Done():
			return stats, ctx.Err()
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// recordCall inserts a test_calls row in the run's fenced transaction, stamped with the
// run's own epoch (from its job_runs row, fixed when it was claimed). Not the leader row's:
// a write that slipped past the fence after a new election would carry the new epoch and
// look legitimate.
func recordCall(ctx context.Context, env *jobcontract.Env) error {
	return env.Tx(ctx, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `
			INSERT INTO test_calls (run_id, epoch, written_at)
			SELECT id, epoch, clock_timestamp() FROM job_runs WHERE id = $1`, env.RunID)
		return err
	})
}

var testJobs = []jobcontract.Job{
	recordJob{"tick"}, blockJob{"slow"}, panicJob{"boom"}, walkPanicJob{"walk-boom"}, writerJob{"writer"}, chattyJob{"chatty"}, unfencedJob{"unfenced"},
}

var registry = jobcontract.NewRegistry(testJobs...)

// nodeRegistry is the test jobs and data-retention, wired to the node's engine and database
// as the replica wires it.
func nodeRegistry(db *store.DB, en **Engine) *jobcontract.Registry {
	return jobcontract.NewRegistry(append(testJobs,
		// Every finished run older than a minute is expired.
		jobs.NewDataRetention(jobs.RetentionSettings{JobRuns: time.Minute}, jobs.RunDays{
			CatchUpWindows: func() map[string]time.Duration { return (*en).CatchUpWindows() },
			Drop:           db.DropRunDays,
		}),
	)...)
}

// newDB gives the test its own database with the test_calls table.
func newDB(t *testing.T) (*testdb.DB, string) {
	t.Helper()
	db, url := testdb.Open(t, store.Options{InstanceID: "test"})
	_, err := db.Pool.Exec(context.Background(), `
		CREATE TABLE test_calls (
			run_id     bigint NOT NULL,
			epoch      bigint NOT NULL,
			written_at timestamptz NOT NULL
		)`)
	require.NoError(t, err)
	return db, url
}

func jobConfig(t *testing.T, name, spec string, timeout time.Duration) config.Job {
	t.Helper()
	s, err := schedule.Parse(spec)
	require.NoError(t, err)
	return config.Job{Name: name, Schedule: s, Enabled: true, Timeout: timeout, Catchup: s.Period(time.Now())}
}

type nodeOptions struct {
	jobs           []config.Job
	lease          time.Duration
	pollInterval   time.Duration
	maxMissed      int
	rescueInterval time.Duration
	slotAudit      time.Duration       // the slot audit's interval, and its grace (default: a minute)
	slotAuditGrace time.Duration       // the audit's grace when not slotAudit
	tracer         pgx.QueryTracer     // store.Options.Tracer: faults injected into the node's statements
	log            *slog.Logger        // default: stderr, errors only unless TEST_LOG is set
	metrics        *metrics.Metrics    // default: none
	runtime        *runtimejob.Runtime // runtime jobs; nil: none run
	// notifications builds the node's delivery of notifications on its own pool; nil: none.
	notifications func(db *store.DB) *deliver.Service
	// claimAheadFrom, when set, is the shortest period whose slots are claimed ahead
	// (default: a minute).
	claimAheadFrom time.Duration
	// now, when set, stops the leader services' clock there (clock): Go's and SQL's time.
	now time.Time
	// gate bounds the node's run bodies; nil: the engine's own (bodies.go).
	gate *Gate
}

// set stops c at now, for the services' Go code and their statements alike.
func (c *clock) set(now time.Time) { c.stub.Store(&now) }

// node is one scheduler: an elector and an engine on their own pool, as in one replica.
type node struct {
	t      *testing.T
	id     string
	db     *testdb.DB
	el     *leader.Elector
	en     *Engine
	terms  *leader.Subscription // a second subscription, for the test to watch terms
	cancel context.CancelFunc
	done   chan struct{}
}

func startNode(t *testing.T, url, id string, opts nodeOptions) *node {
	t.Helper()
	if opts.lease == 0 {
		opts.lease = 2 * time.Second
	}
	if opts.pollInterval == 0 {
		opts.pollInterval = config.PollIntervalDefault
	}
	db := testdb.Connect(t, url, store.Options{InstanceID: id, LeaseTimeout: opts.lease, Tracer: opts.tracer})
	log := opts.log
	if log == nil {
		log = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: logLevel()}))
	}
	notes := pglisten.New(db.DB, log)
	el, err := leader.New(leader.Config{DB: db.DB, Notifier: notes, InstanceID: id, LeaseTimeout: opts.lease, Log: log, Metrics: opts.metrics})
	require.NoError(t, err)
	var sender *deliver.Service
	if opts.notifications != nil {
		sender = opts.notifications(db.DB)
	}
	var en *Engine
	en, err = New(Config{Notifications: sender, DB: db.DB, Notifier: notes, Registry: nodeRegistry(db.DB, &en), Jobs: opts.jobs, InstanceID: id, Log: log,
		PollInterval: opts.pollInterval, MaxMissed: opts.maxMissed, RescueInterval: opts.rescueInterval, Metrics: opts.metrics,
		SlotAuditInterval: opts.slotAudit, SlotAuditGrace: cmp.Or(opts.slotAuditGrace, opts.slotAudit),
		Runtime: opts.runtime, Gate: opts.gate})
	require.NoError(t, err)
	en.testSignals.init()
	if !opts.now.IsZero() {
		en.clock.set(opts.now)
	}
	if opts.claimAheadFrom > 0 {
		en.claimAheadFrom = opts.claimAheadFrom
	}
	n := &node{t: t, id: id, db: db, el: el, en: en, terms: el.Listen(), done: make(chan struct{})}
	sub := el.Listen()
	ctx, cancel := context.WithCancel(context.Background())
	n.cancel = cancel
	go func() {
		defer close(n.done)
		notifying := make(chan struct{})
		go func() { defer close(notifying); notes.Run(ctx) }()
		go en.Run(ctx, sub.C())
		el.Run(ctx)
		<-notifying
	}()
	t.Cleanup(n.stop)
	return n
}

// stop shuts the node down as SIGTERM does: the elector resigns, the engine stops.
func (n *node) stop() {
	n.cancel()
	select {
	case <-n.done:
	case <-time.After(waitTimeout):
		n.t.Fatalf("%s did not stop within %s", n.id, waitTimeout)
	}
}

func logLevel() slog.Level {
	if os.Getenv("TEST_LOG") != "" {
		return slog.LevelDebug
	}
	return slog.LevelError
}

func awaitSignal[T any](t *testing.T, s *testsignal.Signal[T], what string) T {
	t.Helper()
	return s.Await(t, waitTimeout, what)
}

func awaitTerm(t *testing.T, n *node) leader.Term {
	t.Helper()
	select {
	case term := <-n.terms.C():
		return term
	case <-time.After(waitTimeout):
		t.Fatalf("%s was not elected", n.id)
		panic("unreachable")
	}
}

// queueRun inserts a manual run as the API does.
func queueRun(t *testing.T, db *testdb.DB, job string) int64 {
	t.Helper()
	return storetest.Run(context.Background(), t, db.Pool, storetest.RunOpts{Job: job, Status: store.StatusQueued}).ID
}

func getRun(t *testing.T, db *testdb.DB, id int64) *store.Run {
	t.Helper()
	r, err := db.Run(context.Background(), id)
	require.NoError(t, err)
	return r
}

func runsOf(t *testing.T, db *testdb.DB, job string) []*store.Run {
	t.Helper()
	runs, err := db.ListRuns(context.Background(), store.RunFilter{Job: job, Limit: math.MaxInt32})
	require.NoError(t, err)
	slices.Reverse(runs) // oldest first
	return runs
}

// awaitStatus waits until run id reaches status.
func awaitStatus(t *testing.T, db *testdb.DB, id int64, status string) *store.Run {
	t.Helper()
	require.Eventually(t, func() bool {
		var s string
		err := db.Pool.QueryRow(context.Background(), `SELECT status FROM job_runs WHERE id = $1`, id).Scan(&s)
		return err == nil && s == status
	}, waitTimeout, 10*time.Millisecond, fmt.Sprintf("run %d to become %s", id, status))
	return getRun(t, db, id)
}

func count(t *testing.T, db *testdb.DB, sql string, args ...any) int {
	t.Helper()
	var n int
	require.NoError(t, db.Pool.QueryRow(context.Background(), sql, args...).Scan(&n))
	return n
}

// awaitFinished waits until run id reaches a final status.
func awaitFinished(t *testing.T, db *testdb.DB, id int64) *store.Run {
	t.Helper()
	var r *store.Run
	require.Eventually(t, func() bool {
		r = getRun(t, db, id)
		return r.Finished()
	}, waitTimeout, 10*time.Millisecond, fmt.Sprintf("run %d to finish", id))
	return r
}
