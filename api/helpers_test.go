package api

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"
	"github.com/stretchr/testify/require"

	"github.com/schedulerhq/scheduler/client"
	"github.com/schedulerhq/scheduler/internal/config"
	"github.com/schedulerhq/scheduler/internal/metrics"
	"github.com/schedulerhq/scheduler/internal/pglisten"
	"github.com/schedulerhq/scheduler/internal/schedule"
	"github.com/schedulerhq/scheduler/internal/store"
	"github.com/schedulerhq/scheduler/internal/store/storetest"
	"github.com/schedulerhq/scheduler/internal/testdb"
)

func TestMain(m *testing.M) { testdb.Main(m) }

const (
	testToken    = "s3cret-token"
	testInstance = "api-test-1"
)

// testAPI is one API server on its own migrated database.
type testAPI struct {
	t      testing.TB
	db     *testdb.DB
	server *Server
	http   *httptest.Server
	router routers.Router
}

// testJobs: an hourly job, a daily one, and a disabled one.
func testJobs(t testing.TB) []config.Job {
	mk := func(name, spec string, enabled bool) config.Job {
		s, err := schedule.Parse(spec)
		require.NoError(t, err)
		return config.Job{Name: name, Schedule: s, Enabled: enabled, Timeout: 10 * time.Minute, Catchup: time.Hour}
	}
	return []config.Job{
		mk("rounds-create", "0 * * * *", true),
		mk("plan-change", "0 2 * * *", true),
		mk("status-sync", "0 3 * * *", false),
	}
}

// loadOpenAPI loads and validates openapi.yaml once per test binary.
var loadOpenAPI = sync.OnceValues(func() (routers.Router, error) {
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromData(OpenAPI)
	if err != nil {
		return nil, fmt.Errorf("openapi.yaml must load: %w", err)
	}
	if err := doc.Validate(loader.Context); err != nil {
		return nil, fmt.Errorf("openapi.yaml must be a valid OpenAPI document: %w", err)
	}
	return gorillamux.NewRouter(doc)
})

func newTestAPI(t testing.TB) *testAPI {
	t.Helper()
	// The lease bounds how long a new connection may take to open (it also bounds partition
	// detection, which these tests do not exercise). A burst of 50 requests opens the pool's
	// connections at once; on a test machine busy with every other package, one took longer
	// than the default 5 s and its request answered 503.
	db, _ := testdb.Open(t, store.Options{InstanceID: testInstance, LeaseTimeout: time.Minute})
	s := NewServer(Config{DB: db.DB, Notifier: startNotifier(t, db), InstanceID: testInstance, Jobs: testJobs(t),
		APIToken: testToken, Recorder: metrics.New()})
	// Waits learn of a finish from its notification alone; TestWaitRechecksWithoutNotification
	// shortens this to test the fallback.
	s.waitRecheck = time.Hour
	router, err := loadOpenAPI()
	require.NoError(t, err)
	ts := httptest.NewServer(s.Handler())
	t.Cleanup(ts.Close)
	return &testAPI{t: t, db: db, server: s, http: ts, router: router}
}

// startNotifier runs a replica's notifier on db until the test ends.
func startNotifier(t testing.TB, db *testdb.DB) *pglisten.Notifier {
	t.Helper()
	n := pglisten.New(db.DB, nil)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); n.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Errorf("the notifier did not stop within 10 s")
		}
	})
	return n
}

// response is an answer read in full.
type response struct {
	Status int
	Header http.Header
	Body   []byte
}

func (r response) JSON(t testing.TB) map[string]any {
	t.Helper()
	var m map[string]any
	require.NoError(t, json.Unmarshal(r.Body, &m), "body: %s", r.Body)
	return m
}

// problemType returns the slug of a problem answer's type, after checking the problem's
// media type and required members.
func (r response) problemType(t testing.TB) string {
	t.Helper()
	require.Equal(t, "application/problem+json", r.Header.Get("Content-Type"), "body: %s", r.Body)
	m := r.JSON(t)
	require.Equal(t, float64(r.Status), m["status"])
	require.NotEmpty(t, m["title"])
	require.NotEmpty(t, m["detail"])
	typ, _ := m["type"].(string)
	require.True(t, strings.HasPrefix(typ, client.ProblemBase), "type %q", typ)
	return strings.TrimPrefix(typ, client.ProblemBase)
}

// problemField returns the field of a problem's first errors entry.
func (r response) problemField(t testing.TB) string {
	t.Helper()
	m := r.JSON(t)
	errs, _ := m["errors"].([]any)
	require.NotEmpty(t, errs, "problem without errors[]: %s", r.Body)
	return errs[0].(map[string]any)["field"].(string)
}

type header map[string]string

// do sends a request with the token (unless headers set Authorization) and validates the
// answer against openapi.yaml.
func (a *testAPI) do(method, path string, body string, h header) response {
	a.t.Helper()
	return a.doCtx(context.Background(), method, path, body, h)
}

func (a *testAPI) doCtx(ctx context.Context, method, path string, body string, h header) response {
	a.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, a.http.URL+path, rd)
	require.NoError(a.t, err)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Authorization", "Bearer "+testToken)
	for k, v := range h {
		switch {
		case k == "Host":
			req.Host = v
		case v == "":
			req.Header.Del(k)
		default:
			req.Header.Set(k, v)
		}
	}
	res, err := a.http.Client().Do(req)
	require.NoError(a.t, err)
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	require.NoError(a.t, err)
	out := response{Status: res.StatusCode, Header: res.Header, Body: b}
	a.validate(req, out)
	return out
}

// validate checks an answer against the route's responses in openapi.yaml: the status must
// be listed and the body must match its schema.
func (a *testAPI) validate(req *http.Request, res response) {
	a.t.Helper()
	vreq := req.Clone(context.Background())
	vreq.URL.Scheme, vreq.URL.Host = "", ""
	vreq.Host = ""
	route, params, err := a.router.FindRoute(vreq)
	if err != nil && req.Method == http.MethodHead {
		// Every GET route answers HEAD; openapi.yaml lists HEAD only where probes use it.
		vreq.Method = http.MethodGet
		route, params, err = a.router.FindRoute(vreq)
	}
	if err != nil {
		// Not a route of the API (a test of the 404/405 answers): only the problem shape.
		require.Equal(a.t, "application/problem+json", res.Header.Get("Content-Type"))
		return
	}
	in := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: &openapi3filter.RequestValidationInput{
			Request: vreq, PathParams: params, Route: route,
			Options: &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc},
		},
		Status: res.Status,
		Header: res.Header,
		Body:   io.NopCloser(bytes.NewReader(res.Body)),
		Options: &openapi3filter.Options{
			IncludeResponseStatus: true,
			ExcludeResponseBody:   req.Method == http.MethodHead || route.Path == "/metrics" || route.Path == "/openapi.yaml" || strings.HasPrefix(route.Path, "/ui"),
			MultiError:            true,
		},
	}
	require.NoError(a.t, openapi3filter.ValidateResponse(context.Background(), in),
		"%s %s answered %d against openapi.yaml; body: %s", req.Method, req.URL.Path, res.Status, res.Body)
	a.requireDeclaredHeaders(req, route.Operation, res)
}

// apiHeaders are the response headers of the API's own that a client reads; a generated
// client exposes only the headers openapi.yaml declares for the answer's status.
var apiHeaders = []string{"X-Request-Id", "Retry-After", "Idempotent-Replayed", "ETag", "Location", "WWW-Authenticate", "X-Job-Version"}

// requireDeclaredHeaders fails when the answer carries one of apiHeaders that openapi.yaml
// does not declare for its route and status.
func (a *testAPI) requireDeclaredHeaders(req *http.Request, op *openapi3.Operation, res response) {
	a.t.Helper()
	ref := op.Responses.Status(res.Status)
	require.NotNil(a.t, ref, "%s %s: status %d is not in openapi.yaml", req.Method, req.URL.Path, res.Status)
	declared := map[string]bool{}
	for name := range ref.Value.Headers {
		declared[http.CanonicalHeaderKey(name)] = true
	}
	for _, name := range apiHeaders {
		if res.Header.Get(name) != "" {
			require.True(a.t, declared[http.CanonicalHeaderKey(name)],
				"%s %s answered %d with %s, which openapi.yaml does not declare for that answer", req.Method, req.URL.Path, res.Status, name)
		}
	}
}

// exec runs SQL on the test database (playing the engine's part).
func (a *testAPI) exec(sql string, args ...any) {
	a.t.Helper()
	_, err := a.db.Pool.Exec(context.Background(), sql, args...)
	require.NoError(a.t, err)
}

// insertRun stores a run (storetest.Run) and returns its id: a run's id carries its day
// (migration 0013), so a test cannot know it in advance.
func (a *testAPI) insertRun(o storetest.RunOpts) int64 {
	a.t.Helper()
	return storetest.Run(context.Background(), a.t, a.db.Pool, o).ID
}

// insertRuns stores runs in one statement (storetest.Runs).
func (a *testAPI) insertRuns(opts ...storetest.RunOpts) {
	a.t.Helper()
	storetest.Runs(context.Background(), a.t, a.db.Pool, opts...)
}

func (a *testAPI) count(sql string, args ...any) int {
	a.t.Helper()
	var n int
	require.NoError(a.t, a.db.Pool.QueryRow(context.Background(), sql, args...).Scan(&n))
	return n
}

// receive waits at most d for a value on ch, so a regression fails the test instead of
// hanging it.
func receive[T any](t testing.TB, ch <-chan T, d time.Duration, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(d):
		t.Fatalf("timed out after %s waiting for %s", d, what)
		panic("unreachable")
	}
}
