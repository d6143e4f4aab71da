package leader

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schedulerhq/scheduler/internal/metrics"
	"github.com/schedulerhq/scheduler/internal/pglisten"
	"github.com/schedulerhq/scheduler/internal/store"
	"github.com/schedulerhq/scheduler/internal/testdb"
	"github.com/schedulerhq/scheduler/internal/testmetrics"
	"github.com/schedulerhq/scheduler/internal/testpace"
	"github.com/schedulerhq/scheduler/internal/testsignal"
)

func TestMain(m *testing.M) { testdb.Main(m) }

// waitTimeout bounds a wait for an elector: 10 s on an idle machine, stretched by the
// machine's pace when the package's tests start (internal/testpace).
var waitTimeout = testpace.Scaled(10 * time.Second)

func await[T any](t *testing.T, s *testsignal.Signal[T], what string) T {
	t.Helper()
	return s.Await(t, waitTimeout, what)
}

type replica struct {
	t      *testing.T
	id     string
	db     *testdb.DB
	e      *Elector
	sub    *Subscription
	cancel context.CancelFunc
	done   chan struct{}
}

// startReplica starts an elector on its own pool (so its application_name is its own).
func startReplica(t *testing.T, url, id string, lease time.Duration) *replica {
	t.Helper()
	return startReplicaWithMetrics(t, url, id, lease, nil)
}

func startReplicaWithMetrics(t *testing.T, url, id string, lease time.Duration, m *metrics.Metrics) *replica {
	t.Helper()
	return startReplicaWith(t, url, id, lease, m, nil)
}

// startReplicaWith is startReplicaWithMetrics with setup run on the elector before it starts.
func startReplicaWith(t *testing.T, url, id string, lease time.Duration, m *metrics.Metrics, setup func(*Elector)) *replica {
	t.Helper()
	db := testdb.Connect(t, url, store.Options{InstanceID: id, LeaseTimeout: lease})
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	n := pglisten.New(db.DB, log)
	e, err := New(Config{DB: db.DB, Notifier: n, InstanceID: id, LeaseTimeout: lease, InstanceHeartbeat: 200 * time.Millisecond, Metrics: m,
		PollInterval: 200 * time.Millisecond,
		Log:          log})
	require.NoError(t, err)
	e.testSignals.init()
	if setup != nil {
		setup(e)
	}
	r := &replica{t: t, id: id, db: db, e: e, sub: e.Listen(), done: make(chan struct{})}
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	go func() {
		defer close(r.done)
		notifying := make(chan struct{})
		go func() { defer close(notifying); n.Run(ctx) }()
		e.Run(ctx)
		<-notifying
	}()
	t.Cleanup(r.stop)
	return r
}

// startLeaderAndFollower starts replica a on a new database, awaits its term, then starts
// replica b.
func startLeaderAndFollower(t *testing.T) (a, b *replica) {
	t.Helper()
	url := testdb.New(t)
	a = startReplica(t, url, "a", 2*time.Second)
	awaitTerm(t, a, "a leading")
	return a, startReplica(t, url, "b", 2*time.Second)
}

func (r *replica) stop() {
	r.cancel()
	select {
	case <-r.done:
	case <-time.After(waitTimeout):
		r.t.Fatalf("replica %s did not stop within %s", r.id, waitTimeout)
	}
}

// awaitTerm returns r's next term, failing the test if none comes in time: a regression
// must fail the test, not hang it.
func awaitTerm(t *testing.T, r *replica, what string) Term {
	t.Helper()
	select {
	case term := <-r.sub.C():
		return term
	case <-time.After(waitTimeout):
		t.Fatalf("timed out after %s waiting for %s", waitTimeout, what)
		panic("unreachable")
	}
}

func leaderRow(t *testing.T, db *testdb.DB) store.LeaderRow {
	t.Helper()
	row, err := db.Leader(context.Background())
	require.NoError(t, err)
	return row
}

func TestOneLeaderAndResignHandsOver(t *testing.T) {
	t.Parallel()
	url := testdb.New(t)
	var rs []*replica
	for i := range 3 {
		rs = append(rs, startReplica(t, url, fmt.Sprintf("r%d", i), 2*time.Second))
	}
	// Exactly one of the three wins; the others keep waiting on the lock.
	gained := pickGained(rs)
	var first *replica
	select {
	case first = <-gained:
	case <-time.After(waitTimeout):
		t.Fatal("no replica was elected")
	}
	term := awaitTerm(t, first, "the first term")
	assert.Equal(t, int64(1), term.Epoch)
	row := leaderRow(t, first.db)
	assert.Equal(t, store.LeaderRow{InstanceID: first.id, Epoch: 1, TermID: term.TermID, Timeline: row.Timeline,
		Since: term.Since}, row)
	assert.NotZero(t, term.TermID, "the election draws a term id")
	assert.Equal(t, int64(1), row.Timeline, "the test cluster never failed over")
	for _, r := range rs {
		isLeader, _ := r.e.IsLeader()
		assert.Equal(t, r == first, isLeader, "replica %s", r.id)
	}

	// Resigning (what SIGTERM does) ends the term and lets a follower in with a new epoch.
	first.stop()
	require.Error(t, term.Ctx.Err(), "the resigned leader's term must be over")
	await(t, &first.e.testSignals.lostLeadership, "the first leader to resign")
	var second *replica
	select {
	case second = <-gained:
	case <-time.After(waitTimeout):
		t.Fatal("no follower took over")
	}
	require.NotSame(t, first, second)
	term2 := awaitTerm(t, second, "the second term")
	assert.Equal(t, int64(2), term2.Epoch)
	assert.True(t, term2.Since.After(term.Since))
	assert.Equal(t, second.id, leaderRow(t, second.db).InstanceID)
}

// pickGained reports the replicas that signal they gained leadership, in order.
func pickGained(rs []*replica) <-chan *replica {
	out := make(chan *replica, len(rs))
	for _, r := range rs {
		go func() {
			select {
			case <-r.e.testSignals.gainedLeadership.C():
				out <- r
			case <-time.After(waitTimeout):
			}
		}()
	}
	return out
}

func TestLeaderStepsDownWhenItsLockSessionIsKilled(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := testdb.New(t)
	r := startReplica(t, url, "solo", time.Second)
	term := awaitTerm(t, r, "the first term")
	require.Equal(t, int64(1), term.Epoch)

	// Kill the lock session from outside, as a DBA or a new leader would.
	var killed int
	require.NoError(t, r.db.Pool.QueryRow(ctx, `
		SELECT count(*) FILTER (WHERE pg_terminate_backend(pid)) FROM pg_locks
		WHERE locktype = 'advisory' AND granted AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`).Scan(&killed))
	require.Equal(t, 1, killed)
	killedAt := time.Now()

	assert.Equal(t, int64(1), await(t, &r.e.testSignals.lostLeadership, "step-down"))
	select {
	case <-term.Ctx.Done():
	default:
		t.Fatal("the term's context must be cancelled when the leader steps down")
	}
	assert.Less(t, time.Since(killedAt), 2*time.Second, "step-down must happen within about the lease")

	// It competes again and wins under a new epoch.
	term2 := awaitTerm(t, r, "the term after the step-down")
	assert.Equal(t, int64(2), term2.Epoch)
}

func TestInstanceHeartbeatsAndStaleRows(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	a, b := startLeaderAndFollower(t)
	_, err := a.db.Pool.Exec(ctx, `
		INSERT INTO scheduler_instances (instance_id, host, version, started_at, last_seen_at)
		VALUES ('gone', 'h', 'v', now() - interval '1 hour', now() - interval '1 hour')`)
	require.NoError(t, err)

	require.Eventually(t, func() bool {
		list, err := a.db.Instances(ctx)
		if err != nil || len(list) != 2 {
			return false
		}
		return list[0].InstanceID == "a" && list[0].IsLeader && list[1].InstanceID == "b" && !list[1].IsLeader
	}, waitTimeout, 20*time.Millisecond, "both replicas listed, the leader marked, the stale row deleted")

	// A clean stop removes the row at once.
	b.stop()
	list, err := a.db.Instances(ctx)
	require.NoError(t, err)
	require.Len(t, list, 1)
	assert.Equal(t, "a", list[0].InstanceID)
}

// histogramCount is the sample count and sum of the histogram series of family name with the
// given label (no label: the family's only series); zero when it has no series yet.
func histogramCount(t *testing.T, m *metrics.Metrics, name string, labels map[string]string) (uint64, float64) {
	t.Helper()
	s := testmetrics.Series(testmetrics.Scrape(t, m), name, labels)
	return s.GetHistogram().GetSampleCount(), s.GetHistogram().GetSampleSum()
}

// The first leader of a cluster has no predecessor, so its hand-over is unknown; a follower
// taking over from a resigned leader measures it from the lock's release, which lies between
// the old leader's stop and this test seeing the new term.
func TestElectionsObserveHandoverAndLeaderRowWait(t *testing.T) {
	t.Parallel()
	url := testdb.New(t)
	m1, m2 := metrics.New(), metrics.New()
	first := startReplicaWithMetrics(t, url, "m1", 2*time.Second, m1)
	term := awaitTerm(t, first, "the first term")
	require.Equal(t, int64(1), term.Epoch)
	second := startReplicaWithMetrics(t, url, "m2", 2*time.Second, m2)
	// The second replica is waiting on the lock only once its row exists and the first's says it leads.
	require.Eventually(t, func() bool {
		var n int
		err := first.db.Pool.QueryRow(context.Background(),
			`SELECT count(*) FROM scheduler_instances WHERE (instance_id = 'm1' AND is_leader) OR instance_id = 'm2'`).Scan(&n)
		return err == nil && n == 2
	}, waitTimeout, 10*time.Millisecond)

	n, _ := histogramCount(t, m1, "scheduler_handover_duration_seconds", nil)
	assert.Zero(t, n, "a cold cluster's first leader has no hand-over to measure")
	n, _ = histogramCount(t, m1, "scheduler_lock_wait_seconds", map[string]string{"lock": "leader_row"})
	assert.Equal(t, uint64(1), n, "every election times its epoch bump")

	stopping := time.Now()
	first.stop()
	term2 := awaitTerm(t, second, "the follower to take over")
	elapsed := time.Since(stopping)
	require.Equal(t, int64(2), term2.Epoch)

	n, sum := histogramCount(t, m2, "scheduler_handover_duration_seconds", nil)
	require.Equal(t, uint64(1), n, "a take-over from a resigned leader has a known hand-over")
	assert.GreaterOrEqual(t, sum, 0.0)
	assert.Less(t, sum, elapsed.Seconds(),
		"measured from the release (not the resigned leader's last periodic heartbeat), it fits inside the stop-to-term time")
	n, _ = histogramCount(t, m2, "scheduler_lock_wait_seconds", map[string]string{"lock": "leader_row"})
	assert.Equal(t, uint64(1), n)
}

// A subscriber that arrives during a term gets that term at once, as River's Listen hands a
// new subscriber the current state; before, it heard nothing until the next election.
func TestLateSubscriberGetsTheCurrentTerm(t *testing.T) {
	t.Parallel()
	r := startReplica(t, testdb.New(t), "late", 2*time.Second)
	term := awaitTerm(t, r, "the first term")
	late := r.e.Listen()
	select {
	case got := <-late.C():
		assert.Equal(t, term.Epoch, got.Epoch)
		assert.NoError(t, got.Ctx.Err(), "the term is still on")
	case <-time.After(waitTimeout):
		t.Fatalf("a subscriber that arrived during term %d got nothing in %s", term.Epoch, waitTimeout)
	}
	select {
	case got := <-late.C():
		t.Fatalf("term %d delivered again", got.Epoch)
	default:
	}
}

// Every replica measures its clock against the database's at each instance heartbeat: slots
// are computed on its own clock, so a skew must be seen (and alerted on) before it matters.
func TestInstanceHeartbeatMeasuresTheClockSkew(t *testing.T) {
	t.Parallel()
	url := testdb.New(t)
	m := metrics.New()
	startReplicaWithMetrics(t, url, "a", 2*time.Second, m)
	var skew float64
	require.Eventually(t, func() bool {
		s := testmetrics.Series(testmetrics.Scrape(t, m), "scheduler_clock_skew_seconds", nil)
		skew = s.GetGauge().GetValue()
		return skew != 0 // the database and this process read one clock a few microseconds apart
	}, waitTimeout, 50*time.Millisecond)
	assert.Less(t, math.Abs(skew), 1.0, "one machine, one clock: %fs", skew)
}

// A follower's wait for the leader lock does not hold back the database's VACUUM horizon.
// A statement keeps its snapshot until it ends, and one wait lasting the whole term kept
// every dead row version of every table: job_runs and its indexes grew by a version per run
// and the claims slowed each minute. Once b waits, a transaction id is used up; every
// snapshot b's sessions take later lies past it, and the old wait's never would.
func TestFollowerWaitDoesNotHoldBackVacuum(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	a, b := startLeaderAndFollower(t)
	require.Eventually(t, func() bool { return waitingForLeaderLock(t, b) }, waitTimeout, 20*time.Millisecond, "b waiting for the leader lock")

	var mark int64
	require.NoError(t, a.db.Pool.QueryRow(ctx, `SELECT txid_current()`).Scan(&mark))
	require.Eventually(t, func() bool {
		old := -1
		_ = a.db.Pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
			WHERE application_name = $1 AND backend_xmin::text::int8 <= $2`, "scheduler:b", mark).Scan(&old)
		return old == 0
	}, waitTimeout, 50*time.Millisecond, "b's sessions holding no snapshot from before the mark")
	isLeader, _ := b.e.IsLeader()
	assert.False(t, isLeader, "b still follows: the wait went on in new statements")
}
