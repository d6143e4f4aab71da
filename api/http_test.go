package api

import (
	"compress/gzip"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/go-chi/chi/v5"
	"github.com/schedulerhq/scheduler/internal/store"
	"github.com/schedulerhq/scheduler/internal/store/storetest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A probe that checks liveness with HEAD must see what GET sees: the same status and
// headers, no body.
func TestHeadAnswersLikeGet(t *testing.T) {
	t.Parallel()
	a := newTestAPI(t)
	noAuth := header{"Authorization": ""}
	for _, path := range []string{"/healthz", "/readyz", "/ui/", "/ui/app.js", "/openapi.yaml", "/v1/jobs"} {
		get := a.do("GET", path, "", nil)
		head := a.do("HEAD", path, "", nil)
		assert.Equal(t, get.Status, head.Status, "HEAD %s", path)
		assert.Equal(t, get.Header.Get("Content-Type"), head.Header.Get("Content-Type"), "HEAD %s", path)
		assert.Empty(t, head.Body, "HEAD %s", path)
	}
	assert.Equal(t, http.StatusUnauthorized, a.do("HEAD", "/v1/jobs", "", noAuth).Status)
}

// Every 405 names the methods the route does allow (RFC 9110 §15.5.6), HEAD wherever GET is.
func TestMethodNotAllowedSaysAllow(t *testing.T) {
	t.Parallel()
	a := newTestAPI(t)
	allowed := map[string][]string{} // path with its parameters filled -> methods
	err := chi.Walk(a.server.Handler().(chi.Routes), func(method, route string, _ http.Handler, _ ...func(http.Handler) http.Handler) error {
		path := strings.NewReplacer("{name}", "plan-change", "{id}", "1", "{asset}", "app.js").Replace(route)
		if !slices.Contains(allowed[path], method) {
			allowed[path] = append(allowed[path], method)
		}
		if method == http.MethodGet && !slices.Contains(allowed[path], http.MethodHead) {
			allowed[path] = append(allowed[path], http.MethodHead)
		}
		return nil
	})
	require.NoError(t, err)
	require.NotEmpty(t, allowed)
	for path, methods := range allowed {
		sort.Strings(methods)
		res := a.do("PATCH", path, "", nil) // no route takes PATCH
		require.Equal(t, http.StatusMethodNotAllowed, res.Status, "PATCH %s", path)
		assert.Equal(t, "method-not-allowed", res.problemType(t))
		got := strings.Split(res.Header.Get("Allow"), ", ")
		sort.Strings(got)
		assert.Equal(t, methods, got, "Allow of %s", path)
	}
}

// The routes the dashboard polls every second answer a weak ETag, and 304 with no body when
// the client already has that answer, until the answer changes.
func TestPolledRoutesAnswerNotModified(t *testing.T) {
	t.Parallel()
	a := newTestAPI(t)
	a.exec(`UPDATE scheduler_leader SET epoch = 3, instance_id = 'leader-1', since = now() WHERE id = 1`)
	run := a.insertRun(storetest.RunOpts{Job: "plan-change", Status: store.StatusSucceeded})
	for _, path := range []string{"/v1/leader", "/v1/instances", "/v1/locks", "/v1/jobs", "/v1/jobs/plan-change",
		"/v1/jobs/plan-change/runs?limit=20", fmt.Sprintf("/v1/runs/%d", run), "/v1/audit"} {
		first := a.do("GET", path, "", nil)
		require.Equal(t, http.StatusOK, first.Status, "GET %s: %s", path, first.Body)
		tag := first.Header.Get("ETag")
		require.True(t, strings.HasPrefix(tag, `W/"`), "GET %s: ETag %q", path, tag)
		again := a.do("GET", path, "", header{"If-None-Match": tag})
		assert.Equal(t, http.StatusNotModified, again.Status, "GET %s", path)
		assert.Empty(t, again.Body, "GET %s", path)
		assert.Equal(t, tag, again.Header.Get("ETag"), "GET %s", path)
		other := a.do("GET", path, "", header{"If-None-Match": `W/"something-else"`})
		assert.Equal(t, http.StatusOK, other.Status, "GET %s", path)
	}
	tag := a.do("GET", "/v1/jobs/plan-change", "", nil).Header.Get("ETag")
	require.Equal(t, http.StatusOK, a.do("POST", "/v1/jobs/plan-change/pause", "", nil).Status)
	changed := a.do("GET", "/v1/jobs/plan-change", "", header{"If-None-Match": tag})
	require.Equal(t, http.StatusOK, changed.Status, "a paused job is a new answer")
	assert.NotEqual(t, tag, changed.Header.Get("ETag"))
}

// JSON, the dashboard's files and the document are gzip-compressed for a client that
// accepts it.
func TestAnswersAreCompressed(t *testing.T) {
	t.Parallel()
	a := newTestAPI(t)
	for _, path := range []string{"/v1/jobs", "/ui/app.js", "/ui/", "/openapi.yaml", "/v1/jobs/nothing"} {
		plain := a.do("GET", path, "", header{"X-Request-Id": "compressed"})
		req, err := http.NewRequest("GET", a.http.URL+path, nil)
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+testToken)
		req.Header.Set("Accept-Encoding", "gzip")
		req.Header.Set("X-Request-Id", "compressed")
		res, err := http.DefaultTransport.RoundTrip(req)
		require.NoError(t, err)
		defer res.Body.Close()
		require.Equal(t, "gzip", res.Header.Get("Content-Encoding"), "GET %s", path)
		assert.Contains(t, res.Header.Values("Vary"), "Accept-Encoding", "GET %s", path)
		zr, err := gzip.NewReader(res.Body)
		require.NoError(t, err, "GET %s", path)
		body, err := io.ReadAll(zr)
		require.NoError(t, err)
		assert.Equal(t, string(plain.Body), string(body), "GET %s", path)
	}
}

// The dashboard's page says whether the API wants a token, so the page asks for it before
// it sends any request the API would refuse.
func TestDashboardSaysWhetherATokenIsNeeded(t *testing.T) {
	t.Parallel()
	a := newTestAPI(t)
	res := a.do("GET", "/ui/", "", header{"Authorization": ""})
	assert.Contains(t, string(res.Body), `<meta name="scheduler-auth" content="bearer">`)

	open := NewServer(Config{DB: a.db.DB, InstanceID: testInstance, Jobs: testJobs(t)})
	a.http.Config.Handler = open.Handler()
	res = a.do("GET", "/ui/", "", header{"Authorization": ""})
	assert.Contains(t, string(res.Body), `<meta name="scheduler-auth" content="none">`)
	again := a.do("GET", "/ui/", "", header{"If-None-Match": res.Header.Get("ETag")})
	assert.Equal(t, http.StatusNotModified, again.Status, "the page revalidates")
}

// /ui/index.html redirects to /ui/, as openapi.yaml says.
func TestDashboardIndexRedirects(t *testing.T) {
	t.Parallel()
	a := newTestAPI(t)
	req, err := http.NewRequest("GET", a.http.URL+"/ui/index.html", nil)
	require.NoError(t, err)
	res, err := http.DefaultTransport.RoundTrip(req)
	require.NoError(t, err)
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	require.Equal(t, http.StatusMovedPermanently, res.StatusCode)
	assert.Equal(t, "./", res.Header.Get("Location"))
	a.validate(req, response{Status: res.StatusCode, Header: res.Header, Body: body})
}
