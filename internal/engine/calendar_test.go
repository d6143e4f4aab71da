package engine

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schedulerhq/scheduler/internal/config"
	"github.com/schedulerhq/scheduler/internal/schedule"
	"github.com/schedulerhq/scheduler/internal/testdb"
)

// ranSlots counts the job's slots that ran, as max_runs counts them.
func ranSlots(t *testing.T, db *testdb.DB, job string) int {
	t.Helper()
	return count(t, db, `SELECT count(*) FROM job_runs WHERE job = $1 AND scheduled_at IS NOT NULL AND rerun = 0
		AND (status IN ('running', 'succeeded', 'failed', 'timed_out', 'abandoned') OR (status = 'cancelled' AND started_at IS NOT NULL))`, job)
}

// awaitSpent waits until the engine has passed over n slots of job because its max_runs ran.
func awaitSpent(t *testing.T, en *Engine, job string, n int) {
	t.Helper()
	for seen := 0; seen < n; {
		if strings.HasPrefix(awaitSignal(t, &en.testSignals.spent, "a slot passed over after max_runs"), job+"@") {
			seen++
		}
	}
}

// max_runs 3 on "@every 1s": three runs, then the slots come and nothing is claimed,
// skipped or recorded missed, on this leader or the next one.
func TestMaxRunsRunsThatManyTimesThenNever(t *testing.T) {
	db, url := newDB(t)
	var calls atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { calls.Add(1) }))
	t.Cleanup(srv.Close)
	n := startNode(t, url, "a", nodeOptions{runtime: runtimeFor(t, "127.0.0.1/32"), pollInterval: 200 * time.Millisecond})
	awaitSignal(t, &n.en.testSignals.leading, "leading")
	createDefinition(t, db, `{"name": "thrice", "schedule": "@every 1s", "max_runs": 3, "http": {"url": "`+srv.URL+`"}}`)

	awaitSpent(t, n.en, "thrice", 3) // the three runs, then three slots passed over
	assert.Equal(t, 3, ranSlots(t, db, "thrice"))
	nothingAfterTheLast := func() {
		t.Helper()
		assert.Zero(t, count(t, db, `SELECT count(*) FROM job_runs WHERE job = 'thrice' AND scheduled_at > (
			SELECT max(scheduled_at) FROM job_runs WHERE job = 'thrice' AND status = 'succeeded')`), "no skip, no miss after the last run")
	}
	nothingAfterTheLast()
	n.stop()

	// The next leader's catch-up finds the job finished: no claim, no missed row.
	m := startNode(t, url, "b", nodeOptions{runtime: runtimeFor(t, "127.0.0.1/32"), pollInterval: 200 * time.Millisecond})
	awaitSignal(t, &m.en.testSignals.leading, "the next leader")
	awaitSpent(t, m.en, "thrice", 2)
	m.stop()
	assert.Equal(t, 3, ranSlots(t, db, "thrice"))
	nothingAfterTheLast()
	assert.Equal(t, int64(3), calls.Load(), "three calls")
}

// Two nodes racing for the leadership, the leader handing over in the middle: the job still
// runs max_runs slots, not one more.
func TestMaxRunsHoldsAcrossTwoNodes(t *testing.T) {
	db, url := newDB(t)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	t.Cleanup(srv.Close)
	nodes := map[string]*node{}
	for _, id := range []string{"a", "b"} {
		nodes[id] = startNode(t, url, id, nodeOptions{runtime: runtimeFor(t, "127.0.0.1/32"), pollInterval: 200 * time.Millisecond})
	}
	createDefinition(t, db, `{"name": "five", "schedule": "@every 1s", "max_runs": 5, "http": {"url": "`+srv.URL+`"}}`)
	require.Eventually(t, func() bool { return ranSlots(t, db, "five") >= 2 }, waitTimeout, 20*time.Millisecond)

	row, err := db.Leader(context.Background())
	require.NoError(t, err)
	nodes[row.InstanceID].stop() // as on SIGTERM: the other takes over
	var next *node
	for id, n := range nodes {
		if id != row.InstanceID {
			next = n
		}
	}
	awaitSpent(t, next.en, "five", 2)
	assert.Equal(t, 5, ranSlots(t, db, "five"))
	assert.Zero(t, count(t, db, `SELECT count(*) FROM job_runs WHERE job = 'five' AND scheduled_at > (
		SELECT max(scheduled_at) FROM job_runs WHERE job = 'five' AND status = 'succeeded')`), "nothing after the last run")
}

// start_at and end_at: no slot outside the window is claimed, caught up or recorded missed,
// by the leader that runs through it or by one elected after it ended.
func TestWindowClaimsNothingOutside(t *testing.T) {
	db, url := newDB(t)
	var now time.Time
	require.NoError(t, db.Pool.QueryRow(context.Background(), `SELECT date_trunc('second', now())`).Scan(&now))
	// Time enough for the first leader to be elected before the window opens.
	from, until := now.Add(4*time.Second), now.Add(8*time.Second)
	s, err := schedule.New([]string{"@every 1s"}, schedule.Options{From: from, Until: until})
	require.NoError(t, err)
	tick := config.Job{Name: "tick", Schedule: s, Enabled: true, Timeout: time.Minute, Catchup: time.Second}

	n := startNode(t, url, "a", nodeOptions{jobs: []config.Job{tick}})
	awaitSignal(t, &n.en.testSignals.leading, "leading")
	require.Eventually(t, func() bool {
		return count(t, db, `SELECT count(*) FROM job_runs WHERE job = 'tick' AND status = 'succeeded'`) >= 1
	}, waitTimeout, 20*time.Millisecond, "the window's first slot runs")
	n.stop()

	// No leader until the window has ended; the next one catches up what it left.
	require.Eventually(t, func() bool {
		var dbNow time.Time
		require.NoError(t, db.Pool.QueryRow(context.Background(), `SELECT now()`).Scan(&dbNow))
		return dbNow.After(until.Add(2 * time.Second))
	}, waitTimeout, 50*time.Millisecond, "the window to end")
	m := startNode(t, url, "b", nodeOptions{jobs: []config.Job{tick}})
	awaitSignal(t, &m.en.testSignals.leading, "the next leader caught up")
	m.stop()

	runs := runsOf(t, db, "tick")
	var got []string
	for _, r := range runs {
		got = append(got, fmt.Sprintf("%s %s", r.ScheduledAt.UTC().Format(time.TimeOnly), r.Status))
		assert.False(t, r.ScheduledAt.Before(from) || r.ScheduledAt.After(until), "slot %s outside the window", r.ScheduledAt)
	}
	require.Len(t, runs, 5, "each slot of the window once: %v", got)
	assert.True(t, runs[0].ScheduledAt.Equal(from), "%v", got)
	assert.True(t, runs[4].ScheduledAt.Equal(until), "%v", got)
}
