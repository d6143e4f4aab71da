package api

import (
	"net/http"
	"time"
)

// NewHTTPServer wraps handler in an http.Server whose timeouts bound what a slow or
// malicious client can hold: headers within 5 s, a whole body within 30 s. WriteTimeout is
// above maxWait, so a trigger with ?wait=5m still gets its answer.
func NewHTTPServer(addr string, handler http.Handler) *http.Server {
	return &http.Server{
		Addr:              addr,
		Handler:           handler,
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      maxWait + 30*time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
	}
}
