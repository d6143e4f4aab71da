package engine

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"sort"
	"sync"
	"testing"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schedulerhq/scheduler/internal/config"
	"github.com/schedulerhq/scheduler/internal/leader"
	"github.com/schedulerhq/scheduler/internal/store"
)

// termLog collects every term of every node, to know which epoch led when.
type termLog struct {
	mu    sync.Mutex
	terms []leader.Term
}

func (l *termLog) watch(n *node) {
	go func() {
		for term := range n.terms.C() {
			l.mu.Lock()
			l.terms = append(l.terms, term)
			l.mu.Unlock()
		}
	}()
}

// epochAt is the epoch of the latest term that began at or before t.
func (l *termLog) epochAt(t time.Time) int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	var best leader.Term
	for _, term := range l.terms {
		if !term.Since.After(t) && term.Since.After(best.Since) {
			best = term
		}
	}
	return best.Epoch
}

// Guarantees 1 and 2: three schedulers against one database, a job every second, a
// leader hand-over in the middle: every slot from the first to the last has exactly one
// row, the job body ran at most once per slot, and each claim was made by the epoch that
// led at the time.
func TestThreeSchedulersClaimEachSlotOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, url := newDB(t)
	opts := nodeOptions{jobs: []config.Job{jobConfig(t, "tick", "@every 1s", time.Minute)}}
	var terms termLog
	nodes := map[string]*node{}
	for i := range 3 {
		n := startNode(t, url, fmt.Sprintf("s%d", i), opts)
		terms.watch(n)
		nodes[n.id] = n
	}
	claims := func() int {
		return count(t, db, `SELECT count(*) FROM job_runs WHERE job = 'tick' AND status = 'succeeded'`)
	}
	require.Eventually(t, func() bool { return claims() >= 5 }, waitTimeout, 50*time.Millisecond)

	// Hand over: the leader shuts down as on SIGTERM.
	row, err := db.Leader(ctx)
	require.NoError(t, err)
	nodes[row.InstanceID].stop()
	require.Eventually(t, func() bool {
		return count(t, db, `SELECT count(*) FROM job_runs WHERE job = 'tick' AND status = 'succeeded' AND epoch > $1`, row.Epoch) >= 5
	}, waitTimeout, 50*time.Millisecond)
	for _, n := range nodes {
		n.stop()
	}

	runs := runsOf(t, db, "tick")
	sort.Slice(runs, func(i, j int) bool { return runs[i].ScheduledAt.Before(*runs[j].ScheduledAt) })
	first, last := *runs[0].ScheduledAt, *runs[len(runs)-1].ScheduledAt
	require.Len(t, runs, int(last.Sub(first)/time.Second)+1, "one row per slot from the first to the last, no gap, no duplicate")
	epochs := map[int64]bool{}
	for i, r := range runs {
		require.Equal(t, first.Add(time.Duration(i)*time.Second), *r.ScheduledAt)
		if r.Status == store.StatusMissed {
			continue
		}
		epochs[*r.Epoch] = true
		assert.Equal(t, terms.epochAt(r.CreatedAt), *r.Epoch, "slot %s claimed by a stale epoch", r.ScheduledAt)
	}
	assert.GreaterOrEqual(t, len(epochs), 2, "the test must span a hand-over")
	assert.Zero(t, count(t, db, `SELECT count(*) FROM (SELECT run_id FROM test_calls GROUP BY run_id HAVING count(*) > 1) d`),
		"the job body ran at most once per claim")
}

// Guarantees 6 and 8: the leader is cut off from PostgreSQL by a proxy that silently drops
// every byte (connections stay open, nobody sees a reset) while its job is writing. A
// follower connected directly takes over; no write of the old epoch commits after the new
// epoch's since, and the old leader cancels its job within the lease.
func TestPartitionedLeaderCannotCommitAfterTakeover(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, dbURL := newDB(t)
	proxy, proxiedURL := startProxy(t, dbURL)
	const lease = 2 * time.Second
	opts := nodeOptions{jobs: []config.Job{manualOnly(t, "writer", time.Minute)}, lease: lease}

	old := startNode(t, proxiedURL, "cut-off", opts)
	oldTerm := awaitTerm(t, old)
	awaitSignal(t, &old.en.testSignals.leading, "the proxied node leading")
	follower := startNode(t, dbURL, "direct", opts)

	id := queueRun(t, db, "writer")
	require.Eventually(t, func() bool {
		return count(t, db, `SELECT count(*) FROM test_calls WHERE run_id = $1`, id) >= 20
	}, waitTimeout, 10*time.Millisecond, "the writer is writing")

	heal := blackhole(t, proxy)
	defer heal()
	cutAt := time.Now()

	select {
	case <-oldTerm.Ctx.Done():
		// Its heartbeat's deadline is the lease after its last good heartbeat, which came
		// before the cut; the margin is scheduling slack on a busy shared machine.
		assert.Less(t, time.Since(cutAt), lease+time.Second, "the cut-off leader must cancel its jobs within the lease")
	case <-time.After(waitTimeout):
		t.Fatal("the cut-off leader never stepped down")
	}
	assert.Equal(t, id, awaitSignal(t, &old.en.testSignals.interrupted, "the writer run to be interrupted"))

	newTerm := awaitTerm(t, follower)
	assert.Greater(t, newTerm.Epoch, oldTerm.Epoch)
	row, err := db.Leader(ctx)
	require.NoError(t, err)
	require.Equal(t, "direct", row.InstanceID)
	assert.Positive(t, count(t, db, `SELECT count(*) FROM test_calls WHERE epoch = $1`, oldTerm.Epoch))
	assert.Zero(t, count(t, db, `SELECT count(*) FROM test_calls WHERE epoch < $1 AND written_at >= $2`, newTerm.Epoch, row.Since),
		"a write of the old epoch committed after the new leader's since")

	// The run the old leader could not finish is abandoned and recovered by the new one.
	awaitSignal(t, &follower.en.testSignals.leading, "the follower leading")
	assert.Equal(t, store.StatusAbandoned, getRun(t, db, id).Status)
	var recovery int64
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT id FROM job_runs WHERE recovers_run_id = $1`, id).Scan(&recovery))
	awaitStatus(t, db, recovery, store.StatusRunning)
}

// startProxy puts an in-process toxiproxy in front of the database and returns the URL
// through it.
func startProxy(t *testing.T, dbURL string) (*toxiproxy.Proxy, string) {
	t.Helper()
	u, err := url.Parse(dbURL)
	require.NoError(t, err)
	server := toxiproxy.NewServer(toxiproxy.NewMetricsContainer(prometheus.NewRegistry()), zerolog.Nop())
	p := toxiproxy.NewProxy(server, "pg", "127.0.0.1:0", u.Host)
	require.NoError(t, p.Start())
	t.Cleanup(p.Stop)
	_, port, err := net.SplitHostPort(p.Listen)
	require.NoError(t, err)
	u.Host = net.JoinHostPort("127.0.0.1", port)
	return p, u.String()
}
