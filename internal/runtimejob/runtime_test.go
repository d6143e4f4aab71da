package runtimejob_test

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schedulerhq/scheduler/internal/jobcontract"
	"github.com/schedulerhq/scheduler/internal/runtimejob"
	"github.com/schedulerhq/scheduler/internal/store"
	"github.com/schedulerhq/scheduler/internal/targets"
)

// An HTTP job's run counts its attempts by targets.StatusClass, the class the caller reports
// to the metrics: the run's stats and scheduler_target_calls_total name outcomes alike.
func TestHTTPRunCountsAttemptsByStatusClass(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusBadGateway)
	}))
	t.Cleanup(srv.Close)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	closed := "http://" + l.Addr().String() + "/"
	require.NoError(t, l.Close()) // nothing listens: no answer

	g, err := targets.NewGuard([]string{"127.0.0.1/32"})
	require.NoError(t, err)
	var mu sync.Mutex
	metricClasses := map[string]int64{}
	rt := &runtimejob.Runtime{Caller: targets.NewCaller(targets.Config{Guard: g,
		OnCall: func(_, class string, _ time.Duration) {
			mu.Lock()
			defer mu.Unlock()
			metricClasses[class]++
		}})}

	for url, want := range map[string]map[string]int64{
		srv.URL + "/": {"5xx": 2},
		closed:        {targets.NoAnswer: 2},
	} {
		clear(metricClasses)
		checked, _, err := runtimejob.Load([]byte(`{"name": "hook", "schedule": "@every 1h",
			"retry": {"max_attempts": 2, "initial_backoff": "100ms"}, "http": {"url": "` + url + `"}}`))
		require.NoError(t, err)
		var recorded []store.Attempt
		stats, err := rt.Build(checked).Run(context.Background(), &jobcontract.Env{RunID: 1, Log: slog.New(slog.DiscardHandler),
			Call: jobcontract.Call{IdempotencyKey: "k", RecordAttempt: func(_ context.Context, a store.Attempt) error {
				recorded = append(recorded, a)
				return nil
			}}})
		require.Error(t, err, url)
		assert.Equal(t, want, stats.Detail, url)
		assert.Equal(t, want, metricClasses, "the metrics' classes are the stats' for %s", url)
		require.Len(t, recorded, 2, url)
		assert.Equal(t, 1, recorded[0].Number)
		assert.NotNil(t, recorded[0].Error, "a failed attempt is recorded with its error")
	}
}
