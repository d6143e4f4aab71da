package engine

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schedulerhq/scheduler/internal/store"
)

// A run waiting out the backoff between two attempts records when the next one starts (issue
// 34): set to the failed attempt's end plus the backoff (its jittered 1.5 to 3 s), cleared
// when that attempt starts, and null once the run has ended.
func TestRetryingRunRecordsItsNextAttemptTime(t *testing.T) {
	db, url := newDB(t)
	var calls atomic.Int64
	second, release := make(chan struct{}), make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) == 1 {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		close(second)
		select { // held until the test has seen the wait cleared
		case <-release:
		case <-time.After(waitTimeout):
		}
	}))
	t.Cleanup(srv.Close)
	createDefinition(t, db, `{"name": "flaky", "schedule": "0 0 1 1 *", "http": {"url": "`+srv.URL+`"},
		"retry": {"max_attempts": 2, "initial_backoff": "3s"}}`)
	n := startNode(t, url, "a", nodeOptions{runtime: runtimeFor(t, "127.0.0.1/32")})
	awaitSignal(t, &n.en.testSignals.leading, "leading")

	ctx := context.Background()
	run, _, err := db.QueueManualRun(ctx, "flaky", nil, []byte(`{}`))
	require.NoError(t, err)
	var waiting *store.Run
	require.Eventually(t, func() bool {
		r, err := db.Run(ctx, run.ID)
		require.NoError(t, err)
		waiting = r
		return r.NextAttemptAt != nil
	}, waitTimeout, 10*time.Millisecond, "the wait after the 503 is recorded")
	attempts, err := db.Attempts(ctx, run.ID)
	require.NoError(t, err)
	require.Len(t, attempts, 1, "the failed attempt is recorded before the wait")
	assert.Equal(t, store.StatusRunning, waiting.Status)
	end := attempts[0].StartedAt.Add(attempts[0].Duration)
	// The wait is drawn from the upper half of the step (internal/backoff's jitter).
	wait := waiting.NextAttemptAt.Sub(end)
	assert.True(t, wait >= 1400*time.Millisecond && wait <= 3500*time.Millisecond,
		"next attempt = the failed attempt's end + 1.5 to 3 s of initial_backoff; got %s after it", wait)

	select {
	case <-second:
	case <-time.After(waitTimeout):
		t.Fatal("the second attempt never came")
	}
	require.Eventually(t, func() bool {
		r, err := db.Run(ctx, run.ID)
		require.NoError(t, err)
		return r.NextAttemptAt == nil
	}, waitTimeout, 10*time.Millisecond, "the wait is cleared when the next attempt starts")
	close(release)
	awaitStatus(t, db, run.ID, store.StatusSucceeded)
	done, err := db.Run(ctx, run.ID)
	require.NoError(t, err)
	assert.Nil(t, done.NextAttemptAt, "a finished run has no next attempt")
}
