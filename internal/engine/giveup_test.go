package engine

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schedulerhq/scheduler/internal/store"
)

// A leader that gives its term up (an operator's step-down) with a call in flight lets the
// call finish: the term starts nothing more at once, but the call is not cut, the run ends
// succeeded under the old term, and the next leader neither recovers it nor calls its key
// again. Before, the term's end cut the call, and the next leader made it again.
func TestAStepDownLetsTheCallInFlightFinish(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, url := newDB(t)
	arrived := make(chan string, 4)
	answer := make(chan struct{})
	var cut atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		arrived <- r.Header.Get("Idempotency-Key")
		select {
		case <-answer:
		case <-r.Context().Done():
			cut.Add(1)
		}
	}))
	t.Cleanup(srv.Close)
	answered := sync.OnceFunc(func() { close(answer) })
	t.Cleanup(answered) // srv.Close waits for the handler

	opts := nodeOptions{runtime: runtimeFor(t, "127.0.0.1/32"), pollInterval: 200 * time.Millisecond}
	a := startNode(t, url, "a", opts)
	termA := awaitTerm(t, a)
	awaitSignal(t, &a.en.testSignals.leading, "a leading")
	b := startNode(t, url, "b", opts)
	createDefinition(t, db, `{"name": "slow", "schedule": "0 0 1 1 *", "timeout": "1m", "http": {"url": "`+srv.URL+`"}}`)
	awaitSignal(t, &a.en.testSignals.definitionLoaded, "the definition loaded")
	id := queueRun(t, db, "slow")
	var key string
	select {
	case key = <-arrived:
	case <-time.After(waitTimeout):
		t.Fatal("the run's call never arrived")
	}

	_, ok, err := db.RequestStepDown(ctx, store.ControlRequest{TokenKind: "test", RequestID: "step-down"})
	require.NoError(t, err)
	require.True(t, ok, "a leader to step down")
	select {
	case <-termA.Ctx.Done():
	case <-time.After(waitTimeout):
		t.Fatal("a's term did not end on the step-down")
	}
	assert.NoError(t, termA.RunsCtx().Err(), "a's run in flight goes on after its term stopped starting runs")
	assert.Zero(t, cut.Load(), "the call in flight was not cut")

	answered()
	r := awaitFinished(t, db, id)
	assert.Equal(t, store.StatusSucceeded, r.Status)
	require.NotNil(t, r.Epoch)
	assert.Equal(t, termA.Epoch, *r.Epoch, "claimed and ended by a's term")
	termB := awaitTerm(t, b)
	assert.Greater(t, termB.Epoch, termA.Epoch)
	awaitSignal(t, &b.en.testSignals.leading, "b leading, its recovery done")
	assert.Zero(t, count(t, db, `SELECT count(*) FROM job_runs WHERE recovers_run_id = $1`, id), "nothing to recover")
	assert.Zero(t, cut.Load(), "the call in flight was not cut")
	select {
	case again := <-arrived:
		t.Errorf("key %s (first %s) called again", again, key)
	default:
	}
}
