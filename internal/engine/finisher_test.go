package engine

import (
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schedulerhq/scheduler/internal/runtimejob"
	"github.com/schedulerhq/scheduler/internal/store"
	"github.com/schedulerhq/scheduler/internal/targets"
)

// While calls queue for a host's concurrency bound, the end of a run is held, at most
// finishHoldMax, and keeps the time it ended: a burst's ends are recorded after its calls.
func TestRunEndsWaitWhileCallsQueueAndKeepTheirTime(t *testing.T) {
	db, url := newDB(t)
	// The slow host, 127.0.0.2, answers once released; its bound is one call at a time.
	release := make(chan struct{})
	slowCalled := make(chan struct{}, 2)
	slowLn, err := net.Listen("tcp", "127.0.0.2:0")
	require.NoError(t, err)
	slow := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		slowCalled <- struct{}{}
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	slow.Listener = slowLn
	slow.Start()
	t.Cleanup(slow.Close)
	t.Cleanup(func() { close(release) }) // runs before slow.Close
	fastCalled := make(chan time.Time, 1)
	fast := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fastCalled <- time.Now() }))
	t.Cleanup(fast.Close)

	g, err := targets.NewGuard([]string{"127.0.0.0/8"})
	require.NoError(t, err)
	caller := targets.NewCaller(targets.Config{Guard: g, HostConcurrency: 1})
	n := startNode(t, url, "a", nodeOptions{runtime: &runtimejob.Runtime{Caller: caller}, pollInterval: 200 * time.Millisecond})
	awaitSignal(t, &n.en.testSignals.leading, "leading")
	for _, def := range []string{
		`{"name": "blocker-1", "schedule": "0 0 1 1 *", "http": {"url": "` + slow.URL + `"}}`,
		`{"name": "blocker-2", "schedule": "0 0 1 1 *", "http": {"url": "` + slow.URL + `"}}`,
		`{"name": "quick", "schedule": "0 0 1 1 *", "http": {"url": "` + fast.URL + `"}}`,
	} {
		createDefinition(t, db, def)
		awaitSignal(t, &n.en.testSignals.definitionLoaded, "a definition loaded")
	}

	queueRun(t, db, "blocker-1")
	select {
	case <-slowCalled:
	case <-time.After(waitTimeout):
		t.Fatal("blocker-1 did not call its host")
	}
	queueRun(t, db, "blocker-2")
	require.Eventually(t, caller.Queued, waitTimeout, 5*time.Millisecond, "blocker-2's call queues for the host")

	quick := queueRun(t, db, "quick")
	var answered time.Time
	select {
	case answered = <-fastCalled:
	case <-time.After(waitTimeout):
		t.Fatal("quick did not call its host")
	}
	assert.Never(t, func() bool { return getRun(t, db, quick).Status != store.StatusRunning },
		finishHoldMax/4, 20*time.Millisecond, "quick's end is held while blocker-2's call queues")

	r := awaitFinished(t, db, quick)
	recorded := time.Now()
	assert.True(t, caller.Queued(), "held at most finishHoldMax: recorded while blocker-2 still queues")
	assert.Equal(t, store.StatusSucceeded, r.Status)
	require.NotNil(t, r.FinishedAt)
	assert.WithinDuration(t, answered, *r.FinishedAt, finishHoldMax/4,
		"finished_at is when the run ended, not when its end was recorded (%s later)", recorded.Sub(answered))
	assert.GreaterOrEqual(t, recorded.Sub(answered), finishHoldMax/2, "the end waited")
}
