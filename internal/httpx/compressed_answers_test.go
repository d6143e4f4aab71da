package httpx

import (
	"bytes"
	"compress/gzip"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A big answer's kept gzip form is sent only for the same content: answers that alternate
// between two bodies each come back as their own body, whether compressed anew or taken
// from what was kept, and a client that does not accept gzip gets the plain body.
func TestBigAnswersAreNeverSentAsAnotherAnswersKeptForm(t *testing.T) {
	t.Parallel()
	bodies := []string{bigJSON("a"), bigJSON("b")}
	var current int
	var kept CompressedAnswers
	srv := httptest.NewServer(Compress(ConditionalGET(&kept)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, bodies[current])
	}))))
	defer srv.Close()

	get := func(accept string) (*http.Response, string) {
		t.Helper()
		req, err := http.NewRequest(http.MethodGet, srv.URL, nil)
		require.NoError(t, err)
		req.Header.Set("Accept-Encoding", accept)
		res, err := http.DefaultTransport.RoundTrip(req) // no transparent decompression
		require.NoError(t, err)
		defer res.Body.Close()
		raw, err := io.ReadAll(res.Body)
		require.NoError(t, err)
		if res.Header.Get("Content-Encoding") != "gzip" {
			return res, string(raw)
		}
		zr, err := gzip.NewReader(bytes.NewReader(raw))
		require.NoError(t, err)
		plain, err := io.ReadAll(zr)
		require.NoError(t, err)
		return res, string(plain)
	}
	for round := range 3 {
		for i := range bodies {
			current = i
			res, body := get("br, gzip;q=0.5")
			assert.Equal(t, "gzip", res.Header.Get("Content-Encoding"), "round %d, body %d", round, i)
			assert.Contains(t, res.Header.Values("Vary"), "Accept-Encoding")
			assert.True(t, body == bodies[i], "round %d: body %d came back as its own content", round, i)
		}
	}
	assert.Len(t, kept.entries, 2, "each body compressed once and kept")

	// (A weight of 0 is left to compress, which does not read weights: TestAcceptsGzip.)
	for _, accept := range []string{"", "identity", "br"} {
		res, body := get(accept)
		assert.Empty(t, res.Header.Get("Content-Encoding"), "Accept-Encoding %q", accept)
		assert.True(t, body == bodies[current], "Accept-Encoding %q: the plain body", accept)
	}
}

// bigJSON is a JSON answer past fastLevelFrom, told apart by mark.
func bigJSON(mark string) string {
	return `{"mark": "` + mark + `", "pad": "` + strings.Repeat(mark+"0123456789", fastLevelFrom/10) + `"}`
}

func TestAcceptsGzip(t *testing.T) {
	for accept, want := range map[string]bool{
		"gzip": true, "GZIP": true, "br, gzip": true, "gzip;q=0.001": true, "*": true, "deflate, *;q=0.1": true,
		"": false, "br": false, "gzip;q=0": false, "gzip; q=0.0": false, "*;q=0": false, "gzip;q=0, *": false,
	} {
		assert.Equal(t, want, acceptsGzip(accept), "Accept-Encoding %q", accept)
	}
}

// Requests for different big answers at once each get their own content.
func TestConcurrentBigAnswersGetTheirOwnContent(t *testing.T) {
	t.Parallel()
	bodies := []string{bigJSON("a"), bigJSON("b"), bigJSON("c"), bigJSON("d"), bigJSON("e"), bigJSON("f")}
	var kept CompressedAnswers
	srv := httptest.NewServer(Compress(ConditionalGET(&kept)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, bodies[int(r.URL.Query().Get("b")[0]-'0')])
	}))))
	defer srv.Close()
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for k := range 8 {
				i := (g + k) % len(bodies) // more bodies than are kept: entries come and go
				res, err := srv.Client().Get(srv.URL + "?b=" + strconv.Itoa(i))
				if !assert.NoError(t, err) {
					return
				}
				body, err := io.ReadAll(res.Body)
				res.Body.Close()
				assert.NoError(t, err)
				assert.True(t, string(body) == bodies[i], "body %d came back as its own content", i)
			}
		})
	}
	wg.Wait()
	tags := map[string]bool{}
	for _, e := range kept.entries {
		assert.False(t, tags[e.tag], "an answer compressed by two requests at once is kept once")
		tags[e.tag] = true
	}
}
