package api

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"net/http"
	"strings"

	"github.com/go-chi/chi/v5"
)

// etag answers GET requests with a weak ETag over the body and a 304 without body when the
// client's If-None-Match names it: the console polls its pages every second, and most
// answers have not changed since the last. The ETag is weak because the same JSON may travel
// compressed or not.
func etag(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			next.ServeHTTP(w, r)
			return
		}
		buf := &bufferedWriter{header: http.Header{}, status: http.StatusOK}
		next.ServeHTTP(buf, r)
		for k, v := range buf.header {
			w.Header()[k] = v
		}
		if buf.status != http.StatusOK {
			w.WriteHeader(buf.status)
			_, _ = w.Write(buf.body.Bytes())
			return
		}
		sum := sha256.Sum256(buf.body.Bytes())
		tag := `W/"` + base64.RawURLEncoding.EncodeToString(sum[:12]) + `"`
		w.Header().Set("ETag", tag)
		if matchesETag(r.Header.Get("If-None-Match"), tag) {
			w.Header().Del("Content-Type")
			w.Header().Del("Content-Length")
			w.WriteHeader(http.StatusNotModified)
			return
		}
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write(buf.body.Bytes())
	})
}

// matchesETag reports whether an If-None-Match header names tag (weak comparison, RFC 9110
// 13.1.2).
func matchesETag(header, tag string) bool {
	for _, t := range strings.Split(header, ",") {
		t = strings.TrimSpace(t)
		if t == "*" || strings.TrimPrefix(t, "W/") == strings.TrimPrefix(tag, "W/") {
			return true
		}
	}
	return false
}

// bufferedWriter holds an answer until the handler is done, so its ETag can be computed.
type bufferedWriter struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (b *bufferedWriter) Header() http.Header         { return b.header }
func (b *bufferedWriter) WriteHeader(status int)      { b.status = status }
func (b *bufferedWriter) Write(p []byte) (int, error) { return b.body.Write(p) }

// allowedMethods lists the methods router answers on r's path, for the Allow header that a
// 405 must carry (RFC 9110 15.5.6). HEAD goes wherever GET does.
func allowedMethods(router chi.Routes, r *http.Request) string {
	var out []string
	for _, m := range []string{http.MethodGet, http.MethodPost, http.MethodPut, http.MethodDelete, http.MethodPatch} {
		if router.Match(chi.NewRouteContext(), m, r.URL.Path) {
			out = append(out, m)
			if m == http.MethodGet {
				out = append(out, http.MethodHead)
			}
		}
	}
	return strings.Join(out, ", ")
}
