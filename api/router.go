// Package api is the scheduler's HTTP interface: health and readiness, Prometheus metrics,
// the OpenAPI document, and the /v1 routes for jobs, runs, leader, instances and locks.
package api

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/go-chi/chi/v5/middleware"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"golang.org/x/time/rate"

	"github.com/schedulerhq/scheduler/api/ui"
	"github.com/schedulerhq/scheduler/internal/config"
	"github.com/schedulerhq/scheduler/internal/httpx"
	"github.com/schedulerhq/scheduler/internal/idp"
	"github.com/schedulerhq/scheduler/internal/metrics"
	"github.com/schedulerhq/scheduler/internal/outbound"
	"github.com/schedulerhq/scheduler/internal/pglisten"
	"github.com/schedulerhq/scheduler/internal/runtimejob"
	"github.com/schedulerhq/scheduler/internal/secrets"
	"github.com/schedulerhq/scheduler/internal/store"
)

const (
	// maxBodyBytes caps every request body but a job definition's; a trigger body is a
	// reason and a few params.
	maxBodyBytes = 64 << 10
	// maxDefinitionBytes caps a job definition (POST /v1/jobs, PUT /v1/jobs/{name}): its
	// HTTP body and its SQL statements may each be 64 KiB, and JSON escaping grows them.
	maxDefinitionBytes = 256 << 10
	// maxWait caps ?wait on a trigger; NewHTTPServer's WriteTimeout is above it.
	maxWait = 5 * time.Minute
	// queryTimeout bounds each database call of a request, so a stuck database turns into a
	// 503 instead of a hung connection.
	queryTimeout = 10 * time.Second
)

// Config is what the API needs from the rest of the service.
type Config struct {
	DB *store.DB
	// Notifier wakes ?wait requests when their run finishes; nil: they re-read every second.
	Notifier   *pglisten.Notifier
	InstanceID string
	Log        *slog.Logger
	// LeaseTimeout is how long a partition's holder may go without renewing it and still
	// count as its holder in GET /v1/partitions (0: config's default).
	LeaseTimeout time.Duration
	// Jobs are the configured jobs, in the order the API lists them.
	Jobs []config.Job
	// APIToken, when set, is required as "Authorization: Bearer <token>" on every /v1 route.
	APIToken string
	// APITokenNext is accepted beside APIToken during a rotation.
	APITokenNext string
	// ReadToken may read every /v1 route and change nothing (403 on every action).
	ReadToken string
	// OIDC signs in service accounts whose JWTs a configured issuer signed; nil: none.
	OIDC Identifier
	// APIHosts are the Host names a replica without a token answers besides loopback
	// addresses and localhost (config's SCHEDULER_API_HOSTS), lower-case, without port.
	APIHosts []string
	// IdempotencyTTL is how long an Idempotency-Key is remembered (0: config's default).
	IdempotencyTTL time.Duration
	// Metrics serves GET /metrics (default: Recorder's registry when set, else
	// promhttp.Handler() on the default registry).
	Metrics http.Handler
	// MetricsToken, when set, is required as "Authorization: Bearer <token>" on GET
	// /metrics (SCHEDULER_METRICS_TOKEN).
	MetricsToken string
	// Recorder counts requests by route and Idempotency-Key replays and conflicts; nil
	// records nothing.
	Recorder *metrics.Metrics
	// Runtime checks the runtime jobs that POST and PUT define: NewServer sets IsBuiltin
	// from Jobs, and a zero Now means the time of each check. CheckURL and SQLTarget are
	// used as given (nil checks nothing); Secret comes from Secrets when that is set.
	Runtime runtimejob.Env
	// Secrets are the secrets by namespace (internal/secrets): the check's lookup, and the
	// box that seals what the secrets routes store. Nil checks no secret.
	Secrets *secrets.Source
	// MaxJobs bounds the runtime jobs (SCHEDULER_MAX_JOBS; 0: config's default).
	MaxJobs int
	// TokenKeys sign the targets' OIDC tokens and publish their keys (internal/idp): the
	// discovery document and key set, the admin's rotation, and the check that refuses an
	// http.auth.oidc this replica could not sign. Nil: none is signed.
	TokenKeys *idp.Keys
	// Outbound is what each namespace's jobs may reach (internal/outbound): the check of a
	// definition then takes its SQL targets and URL guard from the namespace's surface, and
	// PUT /v1/namespaces/{ns} binds targets, private hosts and environment secrets within
	// it. Nil: Runtime's checks as given, and no namespace can be given any.
	Outbound *outbound.Policy
}

// Server holds the API's dependencies.
type Server struct {
	cfg   Config
	jobs  map[string]*config.Job
	names []string
	// env are the environment's tokens; stored caches the tokens made through the API.
	env    envTokens
	stored storedTokens
	// finishes wakes ?wait requests when their run finishes.
	finishes finishWatch
	// waitRecheck is how often a ?wait re-reads its run without a notification.
	waitRecheck time.Duration
	// refusals and allRefusals bound the refused requests recorded in the audit log, per
	// caller and in all (refusals.go).
	refusals    *callerLimiter
	allRefusals *rate.Limiter
	// runtimeViews keeps the runtime jobs' views between requests.
	runtimeViews jobViews
	// outbound is cfg.Outbound, or a policy with nothing to give when that is nil.
	outbound *outbound.Policy
}

// NewServer builds the API, filling Config's defaults.
func NewServer(cfg Config) *Server {
	if cfg.IdempotencyTTL <= 0 {
		cfg.IdempotencyTTL = config.IdempotencyTTLDefault
	}
	if cfg.Metrics == nil && cfg.Recorder != nil {
		cfg.Metrics = cfg.Recorder.Handler()
	}
	if cfg.Metrics == nil {
		cfg.Metrics = promhttp.Handler()
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.LeaseTimeout <= 0 {
		cfg.LeaseTimeout = config.LeaseTimeoutDefault
	}
	if cfg.MaxJobs <= 0 {
		cfg.MaxJobs = config.MaxJobsDefault
	}
	s := &Server{cfg: cfg, jobs: make(map[string]*config.Job, len(cfg.Jobs)), finishes: finishWatch{notifier: cfg.Notifier, metrics: cfg.Recorder}, waitRecheck: waitRecheck,
		refusals:    newCallerLimiter(refusalsPerSecond, refusalsBurst, refusalCallersMax),
		allRefusals: rate.NewLimiter(refusalsTotalPerSecond, refusalsTotalBurst)}
	for i := range cfg.Jobs {
		j := &s.cfg.Jobs[i]
		s.jobs[j.Name] = j
		s.names = append(s.names, j.Name)
	}
	s.cfg.Runtime.IsBuiltin = func(name string) bool { _, ok := s.jobs[name]; return ok }
	s.cfg.Runtime.TokenSigning = cfg.TokenKeys.CanSign
	s.env = newEnvTokens(cfg.APIToken, cfg.APITokenNext, cfg.ReadToken)
	s.outbound = cfg.Outbound
	if s.outbound == nil {
		s.outbound = outbound.New(nil, nil, nil, cfg.DB)
	}
	return s
}

// Handler returns the router.
func (s *Server) Handler() http.Handler {
	r := chi.NewRouter()
	// observe sits outside the recoverer, so it logs and counts the 500 a panic becomes.
	// GetHead answers HEAD on every GET route, as RFC 9110 asks of every server.
	r.Use(s.requestID, s.observe, s.recoverPanics, s.checkHost, limitBody, middleware.GetHead, httpx.Compress)
	r.NotFound(func(w http.ResponseWriter, r *http.Request) {
		httpx.WriteProblem(w, r, http.StatusNotFound, probNotFound, fmt.Sprintf("no route %s %s; see /openapi.yaml", r.Method, r.URL.Path))
	})
	r.MethodNotAllowed(func(w http.ResponseWriter, req *http.Request) {
		allow := httpx.AllowedMethods(r, req)
		w.Header().Set("Allow", allow)
		httpx.WriteProblem(w, req, http.StatusMethodNotAllowed, probMethodNotAllowed,
			fmt.Sprintf("%s is not allowed on %s (allowed: %s); see /openapi.yaml", req.Method, req.URL.Path, allow))
	})

	dashboard := ui.Handler(s.env.configured())
	r.Get("/healthz", s.healthz)
	r.Get("/readyz", s.readyz)
	r.Method(http.MethodGet, "/metrics", s.metricsGuard(s.cfg.Metrics))
	r.Get("/openapi.yaml", serveOpenAPI)
	r.Get("/ui", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/ui/", http.StatusMovedPermanently) })
	r.Method(http.MethodGet, "/ui/", dashboard)
	r.Method(http.MethodGet, "/ui/{asset}", dashboard)
	// Declared in openapi.yaml for the probes that use them; GetHead serves the same.
	r.Head("/healthz", s.healthz)
	r.Head("/readyz", s.readyz)
	r.Method(http.MethodHead, "/ui/", dashboard)

	// Authenticated by each run's own token, not by an API token (callbacks.go).
	s.callbackRoutes(r)
	// Public: a target's verifier fetches them without a token (oidc_keys.go).
	s.oidcPublicRoutes(r)
	r.Route("/v1", func(r chi.Router) {
		// Every /v1 GET is polled by the dashboard: revalidated with ETag, answered 304.
		r.Use(s.authenticate, httpx.ConditionalGET)
		r.Get("/whoami", get(s, s.whoami))
		r.Get("/leader", get(s, s.getLeader))
		r.Get("/instances", get(s, s.listInstances))
		r.Get("/partitions", get(s, s.listPartitions))
		r.With(s.mayRead).Get("/locks", get(s, s.listLocks))
		r.Get("/runs/{id}", get(s, s.getRun))
		r.Get("/backfills/{id}", s.getBackfill)
		r.Get("/audit", s.listAudit)
		r.Get("/namespaces", get(s, s.listNamespaces))
		r.With(s.mayRead, s.namespaceExists).Get("/namespaces/{ns}", get(s, s.getNamespace))
		s.jobRoutes(r, "/jobs")
		r.Group(func(r chi.Router) {
			// The caller's grants are checked before the namespace's existence is.
			r.Use(s.namespaceScope)
			s.jobRoutes(r, "/namespaces/{ns}/jobs")
		})
		s.secretRoutes(r) // /namespaces/{ns}/secrets…
		r.With(s.adminOnly).Get("/tokens", get(s, s.listTokens))
		r.With(s.adminOnly).Get("/oidc/keys", s.listOIDCKeys)
		r.Group(func(r chi.Router) {
			r.Use(s.mayAct)
			r.Post("/runs/{id}/cancel", act(s, http.StatusOK, s.cancelRun))
			r.Post("/runs/{id}/rerun", act(s, http.StatusAccepted, s.rerunRun))
			r.Post("/backfills/{id}/cancel", s.cancelBackfill)
			r.With(s.adminOnly).Put("/namespaces/{ns}", s.putNamespace)
			r.With(s.adminOnly).Post("/tokens", act(s, http.StatusCreated, s.createToken))
			r.With(s.adminOnly).Delete("/tokens/{id}", act(s, http.StatusNoContent, s.revokeToken))
			r.With(s.adminOnly).Post("/leader/step-down", act(s, http.StatusAccepted, s.stepDown))
			r.With(s.adminOnly).Post("/instances/{id}/drain", act(s, http.StatusAccepted, s.drain))
			r.With(s.adminOnly).Post("/oidc/keys/rotate", s.rotateOIDCKeys)
		})
	})
	return r
}

// jobRoutes are the routes of one namespace's jobs, under prefix: /v1/jobs… (namespace
// default, and the built-in jobs) and /v1/namespaces/{ns}/jobs….
func (s *Server) jobRoutes(r chi.Router, prefix string) {
	r.Group(func(r chi.Router) {
		r.With(s.mayListJobs).Get(prefix, s.listJobs) // ?namespace=* on /v1/jobs: an admin's
	})
	r.Group(func(r chi.Router) {
		r.Use(s.mayRead)
		r.Get(prefix+"/{name}", get(s, s.getJob))
		r.Get(prefix+"/{name}/runs", s.listRuns)
		r.Get(prefix+"/{name}/slots", s.listSlots)
		r.Get(prefix+"/{name}/notifications", s.listNotifications)
	})
	r.Group(func(r chi.Router) {
		r.Use(s.mayAct, s.mayEdit)
		r.Post(prefix, s.createJob)
		r.Put(prefix+"/{name}", s.putJob)
		r.Delete(prefix+"/{name}", s.deleteJob)
		r.Post(prefix+"/{name}/pause", s.pauseJob)
		r.Post(prefix+"/{name}/resume", s.resumeJob)
		r.Post(prefix+"/{name}/runs", s.triggerRun)
		r.Post(prefix+"/{name}/backfill", s.backfillJob)
	})
}

// namespaceScope checks, on /v1/namespaces/{ns}/jobs…, that the caller may read ns before
// saying whether it exists.
func (s *Server) namespaceScope(next http.Handler) http.Handler {
	return s.mayRead(s.namespaceExists(next))
}

// limitBody caps every request body; reading past the cap fails with *http.MaxBytesError,
// which readBody turns into a 413.
func limitBody(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		limit := bodyLimit(r)
		if r.ContentLength > limit {
			httpx.WriteProblem(w, r, http.StatusRequestEntityTooLarge, httpx.ProbBodyTooLarge,
				fmt.Sprintf("the body has %d bytes; at most %d are accepted", r.ContentLength, limit))
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, limit)
		next.ServeHTTP(w, r)
	})
}

// bodyLimit is maxDefinitionBytes for the routes that take a job definition, else
// maxBodyBytes. It runs before routing, so it matches the paths itself: POST …/jobs and
// PUT …/jobs/{name} (a {name} holds no slash), of /v1 or of /v1/namespaces/{ns}.
func bodyLimit(r *http.Request) int64 {
	path := r.URL.Path
	if rest, ok := strings.CutPrefix(path, "/v1/namespaces/"); ok {
		if _, jobs, ok := strings.Cut(rest, "/"); ok {
			path = "/v1/" + jobs
		}
	}
	rest, isJob := strings.CutPrefix(path, "/v1/jobs")
	switch {
	case r.Method == http.MethodPost && isJob && rest == "",
		r.Method == http.MethodPut && isJob && len(rest) > 1 && rest[0] == '/' && !strings.Contains(rest[1:], "/"):
		return maxDefinitionBytes
	}
	return maxBodyBytes
}

// recoverPanics turns a handler's panic into a 500 problem and a log line, so one bad
// request cannot take the replica down (docs/design.md guarantee 9).
func (s *Server) recoverPanics(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			if v := recover(); v != nil {
				if v == http.ErrAbortHandler {
					panic(v)
				}
				s.cfg.Log.ErrorContext(r.Context(), "http handler panicked", "panic", v,
					"request_id", httpx.RequestID(r.Context()), "method", r.Method, "path", r.URL.Path)
				httpx.WriteProblem(w, r, http.StatusInternalServerError, httpx.ProbInternal,
					"the request failed inside the replica; report it with its request_id")
			}
		}()
		next.ServeHTTP(w, r)
	})
}

// databaseProblem answers a failed database call: 503, since the cause is almost always a
// database that is down or overloaded, and the client may retry.
func (s *Server) databaseProblem(w http.ResponseWriter, r *http.Request, err error) {
	if errors.Is(r.Context().Err(), context.Canceled) {
		return // the client is gone; nobody reads the answer
	}
	s.cfg.Log.ErrorContext(r.Context(), "database call failed", "error", err,
		"request_id", httpx.RequestID(r.Context()), "method", r.Method, "path", r.URL.Path)
	w.Header().Set("Retry-After", "1")
	httpx.WriteProblem(w, r, http.StatusServiceUnavailable, probDatabaseUnavailable,
		"the database did not answer or failed; retry, and see the replica's log for this request_id")
}

// healthz says the process is alive; it never touches the database, so a database outage
// does not make an orchestrator restart healthy replicas.
func (s *Server) healthz(w http.ResponseWriter, r *http.Request) {
	httpx.WriteJSON(w, http.StatusOK, map[string]string{"status": "ok"})
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
		// /readyz answers without a token: the error (host, user, database) goes to the log only.
		s.cfg.Log.WarnContext(r.Context(), "readiness: the database did not answer", "error", err,
			"request_id", httpx.RequestID(r.Context()))
		httpx.WriteJSON(w, http.StatusServiceUnavailable, map[string]any{"status": "unavailable",
			"reason": "database unreachable; see the replica's log"})
	case dirty || got != want:
		httpx.WriteJSON(w, http.StatusServiceUnavailable, map[string]any{"status": "unavailable",
			"reason": "schema version mismatch", "schema_version": got, "dirty": dirty, "want_version": want})
	default:
		httpx.WriteJSON(w, http.StatusOK, map[string]any{"status": "ready", "schema_version": got})
	}
}
