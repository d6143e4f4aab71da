package targets

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schedulerhq/scheduler/internal/tracing"
	"github.com/schedulerhq/scheduler/internal/tracing/tracingtest"
)

// startTracing starts tracing as `scheduler serve` does, exporting to a receiver of the test.
func startTracing(t *testing.T) (*tracing.Tracing, *tracingtest.Receiver) {
	receiver := tracingtest.Start(t)
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.URL)
	tr, err := tracing.Start(context.Background(), tracing.Service{Version: "test", InstanceID: "test"}, nil)
	require.NoError(t, err)
	require.True(t, tr.Enabled())
	return tr, receiver
}

// Each attempt of a traced run's call is a client span under the run's, and the target gets
// a traceparent naming that attempt's span; a call made outside a traced run carries none.
func TestCallAttemptsAreSpansWhoseIDsTheTargetGets(t *testing.T) {
	tr, receiver := startTracing(t)
	var mu sync.Mutex
	var got []string
	n := 0
	srv := serve(t, func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		got = append(got, r.Header.Get("Traceparent"))
		if n++; n == 1 {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	})
	c := loopbackCaller(t, Config{})
	ctx, run := tr.Tracer().Start(context.Background(), "test.run")
	res := c.Do(ctx, Request{Method: "POST", URL: srv.URL + "/hook?token=secret", IdempotencyKey: "k", RunID: 1,
		Retry: RetryPolicy{MaxAttempts: 2, InitialBackoff: time.Millisecond}})
	require.NoError(t, res.Err)
	run.End()
	res = c.Do(context.Background(), Request{Method: "POST", URL: srv.URL + "/untraced", IdempotencyKey: "k2"})
	require.NoError(t, res.Err)
	require.NoError(t, tr.Shutdown(context.Background()))

	mu.Lock()
	defer mu.Unlock()
	require.Len(t, got, 3)
	assert.Empty(t, got[2], "a call outside a traced run carries no traceparent")
	spans := receiver.Await(t, 5*time.Second, "three spans", func(s []tracingtest.Span) bool { return len(s) >= 3 })
	byID := map[string]tracingtest.Span{}
	for _, s := range spans {
		byID[s.SpanID] = s
	}
	for i, tp := range got[:2] {
		parts := strings.Split(tp, "-")
		require.Len(t, parts, 4, "attempt %d's traceparent %q", i+1, tp)
		span, ok := byID[parts[2]]
		require.True(t, ok, "the span the target's traceparent names was exported")
		assert.Equal(t, "scheduler.attempt", span.Name)
		assert.Equal(t, "client", span.Kind)
		assert.Equal(t, run.SpanContext().TraceID().String(), parts[1])
		assert.Equal(t, run.SpanContext().SpanID().String(), span.ParentSpanID)
		assert.Equal(t, []string{"1", "2"}[i], span.Attrs["scheduler.attempt"])
		assert.Equal(t, []string{"503", "200"}[i], span.Attrs["http.response.status_code"])
		assert.Equal(t, i == 0, span.Error, "a failed attempt's span is an error")
		assert.Equal(t, srv.URL+"/hook", span.Attrs["url.full"], "the query, which may hold a token, is left out")
	}
}

// A traced run's SQL statements are a client span under the run's.
func TestSQLStatementsAreASpan(t *testing.T) {
	tr, receiver := startTracing(t)
	f := newSQLFixture(t)
	ctx, run := tr.Tracer().Start(sqlTestCtx(t), "test.run")
	res, err := f.target.Run(ctx, sqlRun("slot-1", `INSERT INTO effects (key) VALUES ('a'), ('b')`))
	require.NoError(t, err)
	run.End()
	require.Equal(t, int64(2), res.RowsAffected)
	require.NoError(t, tr.Shutdown(context.Background()))

	spans := receiver.Await(t, 5*time.Second, "the statements' span", func(s []tracingtest.Span) bool { return len(s) >= 2 })
	var sql *tracingtest.Span
	for i := range spans {
		if spans[i].Name == "scheduler.sql" {
			sql = &spans[i]
		}
	}
	require.NotNil(t, sql)
	assert.Equal(t, run.SpanContext().SpanID().String(), sql.ParentSpanID)
	assert.Equal(t, "client", sql.Kind)
	assert.Equal(t, "postgresql", sql.Attrs["db.system.name"])
	assert.Equal(t, "APP", sql.Attrs["scheduler.sql.target"])
	assert.Equal(t, "1", sql.Attrs["scheduler.sql.statements"])
	assert.Equal(t, "2", sql.Attrs["scheduler.sql.rows_affected"])
}
