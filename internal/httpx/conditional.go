package httpx

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"net/http"
	"strings"

	"github.com/go-chi/chi/v5"
)

// ConditionalGET gives each successful GET (and HEAD) answer a weak ETag, a hash of its
// body, and answers 304 with no body when the client's If-None-Match already names it.
// The dashboard re-polls every second an answer that rarely changes; this way an unchanged
// one costs a few headers. The ETag is weak because the compressed and the plain answer
// are the same content in two encodings. Cache-Control: no-cache makes any cache on the
// way ask again each time instead of serving a stale answer.
func ConditionalGET(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			next.ServeHTTP(w, r)
			return
		}
		buf := &bufferedAnswer{ResponseWriter: w}
		next.ServeHTTP(buf, r)
		if buf.status == 0 {
			buf.status = http.StatusOK
		}
		if buf.status != http.StatusOK {
			w.WriteHeader(buf.status)
			_, _ = w.Write(buf.bytes())
			return
		}
		sum := sha256.Sum256(buf.bytes())
		tag := `W/"` + base64.RawURLEncoding.EncodeToString(sum[:18]) + `"`
		w.Header().Set("ETag", tag)
		w.Header().Set("Cache-Control", "no-cache")
		if etagListed(r.Header.Get("If-None-Match"), tag) {
			// RFC 9110 §15.4.5: a 304 carries the validators, not the content's headers.
			w.Header().Del("Content-Type")
			w.Header().Del("Content-Length")
			w.WriteHeader(http.StatusNotModified)
			return
		}
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write(buf.bytes())
	})
}

// etagListed reports whether an If-None-Match value names tag, by the weak comparison
// RFC 9110 §13.1.2 prescribes for it ("*" names any).
func etagListed(ifNoneMatch, tag string) bool {
	for _, t := range strings.Split(ifNoneMatch, ",") {
		t = strings.TrimSpace(t)
		if t == "*" || strings.TrimPrefix(t, "W/") == strings.TrimPrefix(tag, "W/") {
			return true
		}
	}
	return false
}

// bufferedAnswer holds a handler's status and body until the whole answer is known.
type bufferedAnswer struct {
	http.ResponseWriter
	status int
	body   bytes.Buffer
}

func (b *bufferedAnswer) bytes() []byte { return b.body.Bytes() }

func (b *bufferedAnswer) WriteHeader(status int) {
	if b.status == 0 {
		b.status = status
	}
}

func (b *bufferedAnswer) Write(p []byte) (int, error) {
	if b.status == 0 {
		b.status = http.StatusOK
	}
	return b.body.Write(p)
}

// AllowedMethods lists the methods routes answers at the request's path, for the Allow
// header every 405 must carry (RFC 9110 §15.5.6). Every GET route answers HEAD too.
func AllowedMethods(routes chi.Routes, r *http.Request) string {
	path := r.URL.RawPath
	if path == "" {
		path = r.URL.Path
	}
	var allow []string
	for _, m := range []string{http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete} {
		routed := routes.Match(chi.NewRouteContext(), m, path)
		if m == http.MethodHead {
			routed = routed || routes.Match(chi.NewRouteContext(), http.MethodGet, path)
		}
		if routed {
			allow = append(allow, m)
		}
	}
	return strings.Join(allow, ", ")
}
