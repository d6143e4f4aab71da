package api

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schedulerhq/scheduler/internal/store"
	"github.com/schedulerhq/scheduler/internal/testdb"
)

// syncBuffer is a log sink safe for the server's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) lines(t *testing.T) []map[string]any {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []map[string]any
	sc := bufio.NewScanner(bytes.NewReader(s.b.Bytes()))
	for sc.Scan() {
		var m map[string]any
		require.NoError(t, json.Unmarshal(sc.Bytes(), &m))
		out = append(out, m)
	}
	return out
}

func TestOneLogLinePerRequest(t *testing.T) {
	t.Parallel()
	db, _ := testdb.Open(t, store.Options{InstanceID: testInstance})
	var logs syncBuffer
	s := NewServer(Config{DB: db.DB, Jobs: testJobs(t), Log: slog.New(slog.NewJSONHandler(&logs, nil))})
	h := s.Handler()

	req := httptest.NewRequest("GET", "/v1/jobs/plan-change/runs?limit=1", nil)
	req.Header.Set("X-Request-Id", "req-abc")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	require.Equal(t, http.StatusOK, rec.Code)
	assert.Equal(t, "req-abc", rec.Header().Get("X-Request-Id"), "a caller's request id is kept")

	var requests []map[string]any
	for _, l := range logs.lines(t) {
		if l["msg"] == "http request" {
			requests = append(requests, l)
		}
	}
	require.Len(t, requests, 1)
	l := requests[0]
	assert.Equal(t, "GET", l["method"])
	assert.Equal(t, "/v1/jobs/{name}/runs", l["route"], "the route pattern, so lines group by route")
	assert.Equal(t, float64(200), l["status"])
	assert.Equal(t, "req-abc", l["request_id"])
	assert.Contains(t, l, "duration_ms")
}

func TestPanicsBecomeProblems(t *testing.T) {
	t.Parallel()
	var logs syncBuffer
	s := NewServer(Config{Log: slog.New(slog.NewJSONHandler(&logs, nil))})
	h := s.requestID(s.logRequests(s.recoverPanics(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
		panic("boom")
	}))))
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/v1/jobs", nil))
	assert.Equal(t, http.StatusInternalServerError, rec.Code)
	assert.Equal(t, "application/problem+json", rec.Header().Get("Content-Type"))
	assert.Contains(t, rec.Body.String(), problemBase+"internal")
	var levels []string
	for _, l := range logs.lines(t) {
		levels = append(levels, l["level"].(string)+" "+l["msg"].(string))
	}
	assert.Equal(t, []string{"ERROR http handler panicked", "ERROR http request"}, levels)
}

func TestBodyCapWithoutContentLength(t *testing.T) {
	t.Parallel()
	a := newTestAPI(t)
	// A chunked body (no Content-Length) is cut off by the reader cap instead.
	body := io.MultiReader(strings.NewReader(`{"reason": "`), strings.NewReader(strings.Repeat("x", maxBodyBytes)), strings.NewReader(`"}`))
	req, err := http.NewRequest("POST", a.http.URL+"/v1/jobs/plan-change/runs", body)
	require.NoError(t, err)
	require.Equal(t, int64(0), req.ContentLength)
	req.Header.Set("Authorization", "Bearer "+testToken)
	res, err := a.http.Client().Do(req)
	require.NoError(t, err)
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	assert.Equal(t, http.StatusRequestEntityTooLarge, res.StatusCode, "body: %s", b)
	assert.Contains(t, string(b), problemBase+"body-too-large")
	assert.Zero(t, a.count(`SELECT count(*) FROM job_runs`))
}

func TestMetricsHandlerIsConfigurable(t *testing.T) {
	t.Parallel()
	s := NewServer(Config{Metrics: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, "scheduler_custom 1\n")
	})})
	rec := httptest.NewRecorder()
	s.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	assert.Equal(t, "scheduler_custom 1\n", rec.Body.String())
}

func TestHTTPServerTimeoutsOutlastTheLongestWait(t *testing.T) {
	srv := NewHTTPServer("127.0.0.1:0", http.NotFoundHandler())
	assert.Greater(t, srv.WriteTimeout, maxWait, "a ?wait=5m trigger must be able to answer")
	assert.NotZero(t, srv.ReadHeaderTimeout)
	assert.NotZero(t, srv.ReadTimeout)
	assert.NotZero(t, srv.IdleTimeout)
}

func TestRecorderCountsReplaysConflictsAndRoutes(t *testing.T) {
	t.Parallel()
	a := newTestAPI(t)
	for range 2 {
		res := a.do("POST", "/v1/jobs/plan-change/runs", `{"reason":"m"}`, header{"Idempotency-Key": key1})
		require.Equal(t, http.StatusAccepted, res.Status)
	}
	res := a.do("POST", "/v1/jobs/plan-change/runs", `{"reason":"n"}`, header{"Idempotency-Key": key1})
	require.Equal(t, http.StatusConflict, res.Status)

	res = a.do("GET", "/metrics", "", nil)
	require.Equal(t, http.StatusOK, res.Status)
	body := string(res.Body)
	assert.Contains(t, body, "scheduler_idempotency_replays_total 1\n")
	assert.Contains(t, body, "scheduler_idempotency_conflicts_total 1\n")
	assert.Contains(t, body, `route="/v1/jobs/{name}/runs"`)
}
