package api

import (
	"compress/gzip"
	"io"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// send makes a raw request with the token, without validating the answer (304 and HEAD
// answers have no body to validate).
func (a *testAPI) send(method, path string, h header) *http.Response {
	a.t.Helper()
	req, err := http.NewRequest(method, a.http.URL+path, nil)
	require.NoError(a.t, err)
	req.Header.Set("Authorization", "Bearer "+testToken)
	for k, v := range h {
		req.Header.Set(k, v)
	}
	// A transport that leaves Accept-Encoding and the body as the server sent them.
	res, err := (&http.Transport{DisableCompression: true}).RoundTrip(req)
	require.NoError(a.t, err)
	a.t.Cleanup(func() { res.Body.Close() })
	return res
}

// The console polls its pages every second: an answer that has not changed since the last
// poll is a 304 without body, and the JSON travels compressed.
func TestPolledAnswersAreConditionalAndCompressed(t *testing.T) {
	t.Parallel()
	a := newTestAPI(t)
	first := a.send("GET", "/v1/jobs", nil)
	require.Equal(t, http.StatusOK, first.StatusCode)
	tag := first.Header.Get("ETag")
	require.NotEmpty(t, tag)

	again := a.send("GET", "/v1/jobs", header{"If-None-Match": tag})
	assert.Equal(t, http.StatusNotModified, again.StatusCode)
	body, _ := io.ReadAll(again.Body)
	assert.Empty(t, body)

	a.do("POST", "/v1/jobs/plan-change/pause", "", nil)
	changed := a.send("GET", "/v1/jobs", header{"If-None-Match": tag})
	assert.Equal(t, http.StatusOK, changed.StatusCode, "a pause changes the list")
	assert.NotEqual(t, tag, changed.Header.Get("ETag"))

	gz := a.send("GET", "/v1/jobs", header{"Accept-Encoding": "gzip"})
	require.Equal(t, "gzip", gz.Header.Get("Content-Encoding"))
	r, err := gzip.NewReader(gz.Body)
	require.NoError(t, err)
	plain, err := io.ReadAll(r)
	require.NoError(t, err)
	assert.Contains(t, string(plain), `"plan-change"`)

	script := a.send("GET", "/ui/app.js", header{"Accept-Encoding": "gzip"})
	assert.Equal(t, "gzip", script.Header.Get("Content-Encoding"), "the dashboard's files too")
	assert.NotEmpty(t, script.Header.Get("ETag"))
}

// Probes that use HEAD see a healthy replica, and a 405 says which methods the route takes.
func TestHeadIsAnsweredAndA405SaysWhatIsAllowed(t *testing.T) {
	t.Parallel()
	a := newTestAPI(t)
	for _, path := range []string{"/healthz", "/readyz", "/ui/", "/v1/jobs"} {
		res := a.send("HEAD", path, nil)
		assert.Equal(t, http.StatusOK, res.StatusCode, "HEAD %s", path)
		body, _ := io.ReadAll(res.Body)
		assert.Empty(t, body, "HEAD %s", path)
	}
	res := a.send("POST", "/healthz", nil)
	assert.Equal(t, http.StatusMethodNotAllowed, res.StatusCode)
	assert.Equal(t, "GET, HEAD", res.Header.Get("Allow"))
	res = a.send("DELETE", "/v1/jobs/plan-change/runs", nil)
	assert.Equal(t, http.StatusMethodNotAllowed, res.StatusCode)
	assert.Equal(t, "GET, HEAD, POST", res.Header.Get("Allow"))
}
