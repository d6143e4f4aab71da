// Package api is the scheduler's HTTP interface: health and readiness, Prometheus metrics,
// the OpenAPI document, and the /v1 routes for jobs, runs, leader, instances and locks.
package api

import (
	"context"
	"log/slog"
	"net/http"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/schedulerhq/scheduler/internal/store"
)

// Config is what the API needs from the rest of the service.
type Config struct {
	DB         *store.DB
	InstanceID string
	Log        *slog.Logger
}

// Server holds the API's dependencies.
type Server struct {
	cfg Config
}

// NewServer builds the API.
func NewServer(cfg Config) *Server {
	return &Server{cfg: cfg}
}

// Handler returns the router.
func (s *Server) Handler() http.Handler {
	r := chi.NewRouter()
	r.Get("/healthz", s.healthz)
	r.Get("/readyz", s.readyz)
	return r
}

// healthz says the process is alive; it never touches the database, so a database outage
// does not make an orchestrator restart healthy replicas.
func (s *Server) healthz(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

// readyz says the replica can do its work: the database answers and its schema is at this
// binary's version.
func (s *Server) readyz(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
	defer cancel()
	want := store.SchemaVersion()
	got, dirty, err := s.cfg.DB.AppliedVersion(ctx)
	switch {
	case err != nil:
		writeJSON(w, http.StatusServiceUnavailable, map[string]any{"status": "unavailable", "reason": "database: " + err.Error()})
	case dirty || got != want:
		writeJSON(w, http.StatusServiceUnavailable, map[string]any{"status": "unavailable",
			"reason": "schema version mismatch", "schema_version": got, "dirty": dirty, "want_version": want})
	default:
		writeJSON(w, http.StatusOK, map[string]any{"status": "ready", "schema_version": got})
	}
}
