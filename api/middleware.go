package api

import (
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"net/http"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/go-chi/chi/v5/middleware"

	"github.com/schedulerhq/scheduler/internal/httpx"
)

// requestID takes the caller's X-Request-Id when it is short and printable (so a request can
// be followed through a proxy), or makes one, and echoes it in the answer.
func (s *Server) requestID(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.Header.Get("X-Request-Id")
		if !validRequestID(id) {
			b := make([]byte, 12)
			_, _ = rand.Read(b)
			id = hex.EncodeToString(b)
		}
		w.Header().Set("X-Request-Id", id)
		next.ServeHTTP(w, r.WithContext(httpx.WithRequestID(r.Context(), id)))
	})
}

func validRequestID(id string) bool {
	if id == "" || len(id) > 64 {
		return false
	}
	for i := range len(id) {
		if c := id[i]; c < 0x21 || c > 0x7e {
			return false
		}
	}
	return true
}

// observe wraps the response writer once and, when the request is answered, feeds both
// the request log (one line: method, route pattern, path, status, duration, bytes, request
// id) and the HTTP metrics (count and latency by route pattern, method and status). The
// route is chi's pattern (/v1/runs/{id}), not the raw path, so lines and series group by
// route; chi fills it while routing, so it is read after the handler has run.
//
// A panic that reaches it (recoverPanics re-raises http.ErrAbortHandler) is recorded as the
// 500 it becomes and then re-raised for net/http.
func (s *Server) observe(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		ww := middleware.NewWrapResponseWriter(w, r.ProtoMajor)
		defer func() {
			status := ww.Status()
			if p := recover(); p != nil {
				status = http.StatusInternalServerError
				defer panic(p)
			}
			if status == 0 {
				status = http.StatusOK // the handler wrote nothing: net/http answers 200
			}
			route := ""
			if rc := chi.RouteContext(r.Context()); rc != nil {
				route = rc.RoutePattern()
			}
			elapsed := time.Since(start)
			s.cfg.Recorder.HTTPRequest(route, r.Method, status, elapsed)
			s.cfg.Log.LogAttrs(r.Context(), levelFor(status), "http request",
				slog.String("method", r.Method), slog.String("route", route), slog.String("path", r.URL.Path),
				slog.Int("status", status), slog.Int64("duration_ms", elapsed.Milliseconds()),
				slog.Int("bytes", ww.BytesWritten()), slog.String("request_id", httpx.RequestID(r.Context())))
		}()
		next.ServeHTTP(ww, r)
	})
}

// levelFor logs server errors as errors, so an alert on error lines catches them, and the
// rest as info.
func levelFor(status int) slog.Level {
	if status >= 500 {
		return slog.LevelError
	}
	return slog.LevelInfo
}
