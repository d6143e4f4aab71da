package httpx

import (
	"bytes"
	"compress/flate"
	"compress/gzip"
	"net/http"
	"strconv"
	"strings"
	"sync"
)

// The job list at 10 000 jobs is a 13 MB answer that a console or a script re-reads while
// little changes; gzip took about 16 ms of each request's CPU, a sixth of it. ConditionalGET
// already hashes every answer for its ETag, so a big answer's compressed form is kept by
// that tag: an answer whose body hashes the same is the same content, and is sent as
// compressed before, whoever asks. A body that changed has a new tag and is compressed anew.

// CompressedAnswers keeps the gzip form of the last few big answers, by ETag.
type CompressedAnswers struct {
	mu      sync.Mutex
	entries []compressedAnswer // newest last
}

type compressedAnswer struct {
	tag  string
	gzip []byte
}

// compressedAnswersKept bounds the answers kept: a few namespaces' job lists (a few hundred
// kB each, compressed).
const compressedAnswersKept = 4

// gzipOf returns body gzipped, from the kept answers when one has tag.
func (c *CompressedAnswers) gzipOf(tag string, body []byte) []byte {
	c.mu.Lock()
	for i, e := range c.entries {
		if e.tag == tag {
			c.entries = append(append(c.entries[:i:i], c.entries[i+1:]...), e)
			c.mu.Unlock()
			return e.gzip
		}
	}
	c.mu.Unlock()

	var buf bytes.Buffer
	buf.Grow(len(body) / 16)
	zw, _ := gzip.NewWriterLevel(&buf, flate.BestSpeed) // a level in range never fails
	_, _ = zw.Write(body)                               // writes to a bytes.Buffer do not fail
	_ = zw.Close()
	gz := buf.Bytes()

	c.mu.Lock()
	defer c.mu.Unlock()
	for _, e := range c.entries {
		if e.tag == tag { // compressed meanwhile by a request for the same answer
			return e.gzip
		}
	}
	if len(c.entries) == compressedAnswersKept {
		c.entries = append(c.entries[:0:0], c.entries[1:]...)
	}
	c.entries = append(c.entries, compressedAnswer{tag: tag, gzip: gz})
	return gz
}

// writeCompressed answers a big body the client accepts in gzip, compressed or taken from
// the kept answers; it reports false, writing nothing, when the body is small or the client
// does not accept gzip (compress then decides, as for every answer).
func (c *CompressedAnswers) writeCompressed(w http.ResponseWriter, r *http.Request, tag string, body []byte) bool {
	if len(body) < fastLevelFrom || !acceptsGzip(r.Header.Get("Accept-Encoding")) {
		return false
	}
	gz := c.gzipOf(tag, body)
	h := w.Header()
	h.Set("Content-Encoding", "gzip") // compress leaves an encoded answer alone
	h.Add("Vary", "Accept-Encoding")
	h.Set("Content-Length", strconv.Itoa(len(gz)))
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(gz)
	return true
}

// acceptsGzip reports whether an Accept-Encoding value (RFC 9110 §12.5.3) accepts gzip:
// named, or left to "*", with a weight above 0.
func acceptsGzip(accept string) bool {
	star := false
	for _, part := range strings.Split(accept, ",") {
		coding, params, _ := strings.Cut(part, ";")
		switch strings.ToLower(strings.TrimSpace(coding)) {
		case "gzip":
			return weighted(params)
		case "*":
			star = weighted(params)
		}
	}
	return star
}

// weighted reports whether a coding's parameters leave it a weight above 0.
func weighted(params string) bool {
	for _, p := range strings.Split(params, ";") {
		if k, v, _ := strings.Cut(strings.TrimSpace(p), "="); strings.EqualFold(k, "q") {
			q, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			return err == nil && q > 0
		}
	}
	return true
}
