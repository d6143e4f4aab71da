package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/schedulerhq/scheduler/api"
	"github.com/schedulerhq/scheduler/internal/backoff"
	"github.com/schedulerhq/scheduler/internal/config"
	"github.com/schedulerhq/scheduler/internal/jobs"
	"github.com/schedulerhq/scheduler/internal/logging"
	"github.com/schedulerhq/scheduler/internal/metrics"
	"github.com/schedulerhq/scheduler/internal/store"
	"github.com/schedulerhq/scheduler/internal/tracing"
	"github.com/schedulerhq/scheduler/replica"
)

const serveUsage = `Usage: scheduler serve

Runs one replica: the HTTP API on SCHEDULER_HTTP_ADDR, schema migration, leader election,
and (on the leader only) the job schedule. Stops cleanly on SIGINT/SIGTERM, releasing
leadership first. Configuration is read from the environment (README.md, "Configuration").
`

// retryMin and retryMax bound the backoff while the database is unreachable at start: fast
// enough that a replica is ready within seconds of PostgreSQL coming back, slow enough not
// to flood its log.
const (
	retryMin = 500 * time.Millisecond
	retryMax = 5 * time.Second
)

// poolCloseTimeout bounds closing the database pool at exit, after the shutdown timeout.
const poolCloseTimeout = 2 * time.Second

// traceFlushTimeout bounds exporting the spans still buffered at exit: a collector that is
// down must not hold the exit.
const traceFlushTimeout = 5 * time.Second

// closeWithin calls closeFn and waits for it at most d; it reports whether closeFn returned.
func closeWithin(closeFn func(), d time.Duration) bool {
	done := make(chan struct{})
	go func() {
		defer close(done)
		closeFn()
	}()
	select {
	case <-done:
		return true
	case <-time.After(d):
		return false
	}
}

// serve runs one replica until ctx ends. It reads top-down as the replica's life: settings,
// telemetry, database, replica, HTTP, then (once the schema is ours) leadership and jobs,
// and last the shutdown. The deferred closes run in reverse: the pool, then the spans.
func serve(ctx context.Context, args, environ []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, serveUsage) }
	if err := fs.Parse(args); err != nil {
		if err == flag.ErrHelp {
			return exitOK
		}
		return exitUsage
	}
	cfg, settings, err := loadServeConfig(config.NewEnv(environ))
	if err != nil {
		return configError(stderr, err)
	}
	base := logging.New(stdout, cfg.LogLevel, cfg.LogFormat)
	log := logging.ForInstance(base, cfg.InstanceID)
	traces, err := tracing.Start(ctx, tracing.Service{Version: version, InstanceID: cfg.InstanceID}, log)
	if err != nil {
		return configError(stderr, err)
	}
	// Last out: the runs' spans end as the term does, and are exported before the exit.
	defer flushTraces(traces, log)
	m := serveMetrics(cfg)

	db, err := store.Open(ctx, cfg.DatabaseURL, store.Options{InstanceID: cfg.InstanceID, LeaseTimeout: cfg.LeaseTimeout})
	if err != nil {
		log.Error("cannot use DATABASE_URL", "error", err)
		return exitFailure
	}
	// The leader keeps the day partitions of job_runs ahead; a replica adds them too, so a
	// manual run queued while no leader has been elected for days still has its day.
	if _, err := db.AddRunDays(ctx); err != nil {
		log.Warn("adding the day partitions of job_runs failed; the leader retries", "error", err)
	}
	defer closeStore(db, log)

	rep, err := replica.New(replicaConfig(cfg, settings, db, base, m, traces))
	if err != nil {
		log.Error("cannot build the replica", "error", err)
		return exitFailure
	}
	server, served, err := startHTTP(ctx, cfg.HTTPAddr, rep.Handler(), log)
	if err != nil {
		log.Error("cannot listen; is another process using the port? set SCHEDULER_HTTP_ADDR", "addr", cfg.HTTPAddr, "error", err)
		return exitFailure
	}
	leading, ok := startWhenMigrated(ctx, cfg.DatabaseURL, db, rep, log)
	if !ok {
		return exitFailure
	}
	<-ctx.Done()
	shutdown(cfg.ShutdownTimeout, leading, served, server, log)
	return exitOK
}

// loadServeConfig reads the service settings first: the jobs' settings take the send bounds
// and the no-show grace they configure, and SCHEDULER_JOB_* is checked against the jobs'
// defaults. Every problem is reported at once, by LoadJobs. The replica builds the jobs.
func loadServeConfig(env *config.Env) (*config.Config, jobs.Settings, error) {
	cfg := config.Load(env)
	settings := jobs.LoadSettings(env)
	settings.Send = jobs.SendSettings{Concurrency: cfg.SendConcurrency, Rate: cfg.SendRate}
	settings.Appointments.NoShowGrace = cfg.NoShowGrace
	if err := cfg.LoadJobs(env, jobs.Defaults()); err != nil {
		return nil, jobs.Settings{}, err
	}
	return cfg, settings, nil
}

// flushTraces exports the spans still buffered at exit, within traceFlushTimeout: a
// collector that is down must not hold the exit.
func flushTraces(traces *tracing.Tracing, log *slog.Logger) {
	flushCtx, cancel := context.WithTimeout(context.Background(), traceFlushTimeout)
	defer cancel()
	if err := traces.Shutdown(flushCtx); err != nil {
		log.Warn("exporting the last spans failed; they are lost", "error", err)
	}
}

// serveMetrics are the replica's metrics with every configured job's period set at start:
// the stuck-job alert needs each period before the job's first run, and a disabled job's
// period of 0 keeps it from alerting.
func serveMetrics(cfg *config.Config) *metrics.Metrics {
	m := metrics.New()
	m.SetInstanceID(cfg.InstanceID)
	for _, j := range cfg.Jobs {
		var period time.Duration
		if j.Enabled {
			period = j.Schedule.Period(time.Now())
		}
		m.SetJobPeriod(j.Name, period)
	}
	return m
}

// closeStore closes the pool at exit. The pool's Close waits for every connection in use: a
// job body that ignores its context would hold the exit forever, so the close is bounded.
func closeStore(db *store.DB, log *slog.Logger) {
	if !closeWithin(db.Close, poolCloseTimeout) {
		log.Warn("database connections still in use by a job that ignores its context; exiting without closing them",
			"waited", poolCloseTimeout)
	}
}

// replicaConfig hands the replica what serve loaded, in one place, so serve reads as steps.
func replicaConfig(cfg *config.Config, settings jobs.Settings, db *store.DB, base *slog.Logger, m *metrics.Metrics, traces *tracing.Tracing) replica.Config {
	return replica.Config{DB: db, InstanceID: cfg.InstanceID, Log: base, JobSettings: settings,
		Jobs: cfg.Jobs, Metrics: m, APIToken: cfg.APIToken, APITokenNext: cfg.APITokenNext,
		ReadToken: cfg.APIReadToken, MetricsToken: cfg.MetricsToken, OIDC: cfg.OIDC, APIHosts: cfg.APIHosts, IdempotencyTTL: cfg.IdempotencyTTL,
		LeaseTimeout: cfg.LeaseTimeout, PollInterval: cfg.PollInterval, Version: version, HTTPAddr: cfg.HTTPAddr,
		Partitions: cfg.Partitions, Runtime: cfg.Runtime, RunRetention: settings.Retention.JobRuns, FailoverWindow: cfg.FailoverWindow,
		Notifications: cfg.Notifications, Tracing: traces}
}

// startHTTP serves the API on addr before the schema is migrated, so /readyz answers (not
// ready) while the database is still coming up. served is closed once the server has stopped.
func startHTTP(ctx context.Context, addr string, handler http.Handler, log *slog.Logger) (server *http.Server, served <-chan struct{}, err error) {
	listener, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, nil, err
	}
	server = api.NewHTTPServer(addr, handler)
	// Requests (a ?wait trigger can last minutes) see the shutdown signal, so Shutdown is
	// not held up by them.
	server.BaseContext = func(net.Listener) context.Context { return ctx }
	done := make(chan struct{})
	go func() {
		defer close(done)
		log.Info("http listening", "addr", listener.Addr().String(), "version", version)
		if err := server.Serve(listener); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("http server stopped", "error", err)
		}
	}()
	return server, done, nil
}

// startWhenMigrated runs the replica once the schema is current. Nothing runs before the
// schema is ours: no database, no leader, no job (fail closed). leading is closed when the
// replica has stopped (at once if ctx ended before the schema was ready); on ctx's end the
// replica resigns at once, so a follower takes over while this one is still draining HTTP.
// ok is false if the replica must not start at all (it says why in the log).
func startWhenMigrated(ctx context.Context, databaseURL string, db *store.DB, rep *replica.Replica, log *slog.Logger) (leading <-chan struct{}, ok bool) {
	done := make(chan struct{})
	if err := migrateUntilDone(ctx, databaseURL, log); err != nil {
		close(done)
		return done, true
	}
	log.Info("schema ready", "version", store.SchemaVersion())
	if err := rep.CheckSQLTargets(ctx, log); err != nil {
		log.Error("a SQL target's login could reach the scheduler; not starting", "error", err)
		return nil, false
	}
	if err := rep.EnsureCluster(ctx, db); err != nil {
		log.Error("cannot join the cluster; not starting", "error", err)
		return nil, false
	}
	go func() { defer close(done); rep.Run(ctx) }()
	return done, true
}

// shutdown stops the replica after ctx has ended. Leadership is released first; runs are
// cancelled with their term, and a job body that ignores its context cannot hold the exit
// beyond timeout.
func shutdown(timeout time.Duration, leading, served <-chan struct{}, server *http.Server, log *slog.Logger) {
	log.Info("shutting down")
	shutdownCtx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	select {
	case <-leading:
	case <-shutdownCtx.Done():
		log.Warn("jobs still running at the shutdown timeout; exiting anyway, the next leader recovers them")
	}
	if err := server.Shutdown(shutdownCtx); err != nil {
		log.Warn("http shutdown incomplete", "error", err)
	}
	<-served
	log.Info("stopped")
}

// migrateUntilDone applies pending migrations, retrying while the database is unreachable.
// It returns nil once the schema is current, or ctx's error on shutdown.
func migrateUntilDone(ctx context.Context, databaseURL string, log *slog.Logger) error {
	retry := backoff.New(retryMin, retryMax)
	for attempt := 1; ; attempt++ {
		err := migrateOnce(databaseURL)
		if err == nil {
			return nil
		}
		d := retry.Next()
		log.Error("database not ready; no job runs until it is. Check DATABASE_URL and that PostgreSQL is up; retrying",
			"attempt", attempt, "retry_in", d.String(), "error", err)
		if !backoff.Sleep(ctx, d) {
			return ctx.Err()
		}
	}
}

func migrateOnce(databaseURL string) error {
	mg, err := store.NewMigrator(databaseURL)
	if err != nil {
		return err
	}
	defer mg.Close()
	return mg.Up()
}
