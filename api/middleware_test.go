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

	"github.com/go-chi/chi/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schedulerhq/scheduler/client"
	"github.com/schedulerhq/scheduler/internal/metrics"
	"github.com/schedulerhq/scheduler/internal/store"
	"github.com/schedulerhq/scheduler/internal/testdb"
	"github.com/schedulerhq/scheduler/internal/testmetrics"
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

	req := localRequest("GET", "/v1/jobs/plan-change/runs?limit=1", nil)
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
	h := s.requestID(s.observe(s.recoverPanics(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
		panic("boom")
	}))))
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, localRequest("GET", "/v1/jobs", nil))
	assert.Equal(t, http.StatusInternalServerError, rec.Code)
	assert.Equal(t, "application/problem+json", rec.Header().Get("Content-Type"))
	assert.Contains(t, rec.Body.String(), client.ProblemBase+"internal")
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
	assert.Contains(t, string(b), client.ProblemBase+"body-too-large")
	assert.Zero(t, a.count(`SELECT count(*) FROM job_runs`))
}

func TestMetricsHandlerIsConfigurable(t *testing.T) {
	t.Parallel()
	s := NewServer(Config{Metrics: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, "scheduler_custom 1\n")
	})})
	rec := httptest.NewRecorder()
	s.Handler().ServeHTTP(rec, localRequest("GET", "/metrics", nil))
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

// observe feeds the HTTP metrics by route pattern, never the raw path.
func TestObserveCountsByRoutePattern(t *testing.T) {
	t.Parallel()
	m := metrics.New()
	s := NewServer(Config{Recorder: m})
	r := chi.NewRouter()
	// The recoverer is outside, so observe sees the panic itself and must count a 500.
	r.Use(recoverer)
	r.Use(s.observe)
	r.Get("/healthz", func(w http.ResponseWriter, r *http.Request) {}) // writes nothing: 200
	r.Route("/v1", func(r chi.Router) {
		r.Get("/runs/{id}", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusOK) })
		r.Post("/runs/{id}/cancel", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusConflict) })
		r.Get("/panic", func(w http.ResponseWriter, r *http.Request) { panic("boom") })
	})
	server := httptest.NewServer(r)
	defer server.Close()

	for _, req := range []struct{ method, path string }{
		{http.MethodGet, "/v1/runs/41"},
		{http.MethodGet, "/v1/runs/42"},
		{http.MethodPost, "/v1/runs/42/cancel"},
		{http.MethodGet, "/healthz"},
		{http.MethodGet, "/wp-admin/../etc/passwd"},
		{http.MethodGet, "/v1/panic"},
	} {
		httpReq, err := http.NewRequest(req.method, server.URL+req.path, nil)
		require.NoError(t, err)
		resp, err := http.DefaultClient.Do(httpReq)
		require.NoError(t, err)
		resp.Body.Close()
	}

	families := testmetrics.Scrape(t, m)
	for _, c := range []struct {
		route, method, code string
		want                float64
	}{
		{"/v1/runs/{id}", "GET", "200", 2},
		{"/v1/runs/{id}/cancel", "POST", "409", 1},
		{"/healthz", "GET", "200", 1},
		{"unmatched", "GET", "404", 1},
		{"/v1/panic", "GET", "500", 1},
	} {
		s := testmetrics.Series(families, "scheduler_http_requests_total", map[string]string{"route": c.route, "method": c.method, "code": c.code})
		if assert.NotNil(t, s, "%+v", c) {
			assert.Equal(t, c.want, s.GetCounter().GetValue(), "%+v", c)
		}
	}
	var routes []string
	for _, m := range families["scheduler_http_requests_total"].GetMetric() {
		for _, l := range m.GetLabel() {
			if l.GetName() == "route" {
				routes = append(routes, l.GetValue())
			}
		}
	}
	assert.ElementsMatch(t, []string{"/v1/runs/{id}", "/v1/runs/{id}/cancel", "/healthz", "unmatched", "/v1/panic"}, routes,
		"route labels are patterns, never raw paths (one series per id would grow without bound)")
	latency := testmetrics.Series(families, "scheduler_http_request_duration_seconds", map[string]string{"route": "/v1/runs/{id}", "method": "GET"})
	require.NotNil(t, latency)
	assert.Equal(t, uint64(2), latency.GetHistogram().GetSampleCount())
}

// recoverer answers 500 to a panicking handler, like chi's middleware.Recoverer without its
// stack dump on stderr.
func recoverer(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			if recover() != nil {
				w.WriteHeader(http.StatusInternalServerError)
			}
		}()
		next.ServeHTTP(w, r)
	})
}

// localRequest is an httptest request to a loopback replica without a token, which answers
// only a loopback Host (httptest's default is example.com).
func localRequest(method, target string, body io.Reader) *http.Request {
	req := httptest.NewRequest(method, target, body)
	req.Host = "localhost"
	return req
}
