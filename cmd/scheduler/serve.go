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
	"sync"
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
	// The service settings first: the jobs' settings take the send bounds and the no-show
	// grace they configure, and SCHEDULER_JOB_* is checked against the jobs' defaults.
	// Every problem is reported at once, by LoadJobs. The replica builds the jobs.
	env := config.NewEnv(environ)
	cfg := config.Load(env)
	settings := jobs.LoadSettings(env)
	base := logging.New(stdout, cfg.LogLevel, cfg.LogFormat)
	log := logging.ForInstance(base, cfg.InstanceID)
	settings.Send = jobs.SendSettings{Concurrency: cfg.SendConcurrency, Rate: cfg.SendRate}
	settings.Appointments.NoShowGrace = cfg.NoShowGrace
	if err := cfg.LoadJobs(env, jobs.Defaults()); err != nil {
		return configError(stderr, err)
	}
	traces, err := tracing.Start(ctx, tracing.Service{Version: version, InstanceID: cfg.InstanceID}, log)
	if err != nil {
		return configError(stderr, err)
	}
	// Last out: the runs' spans end as the term does, and are exported before the exit.
	defer func() {
		flushCtx, cancel := context.WithTimeout(context.Background(), traceFlushTimeout)
		defer cancel()
		if err := traces.Shutdown(flushCtx); err != nil {
			log.Warn("exporting the last spans failed; they are lost", "error", err)
		}
	}()
	m := metrics.New()
	m.SetInstanceID(cfg.InstanceID)
	for _, j := range cfg.Jobs {
		var period time.Duration
		if j.Enabled {
			period = j.Schedule.Period(time.Now())
		}
		m.SetJobPeriod(j.Name, period)
	}

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
	// The pool's Close waits for every connection in use: a job body that ignores its
	// context would hold the exit forever, so the close is bounded too.
	defer func() {
		if !closeWithin(db.Close, poolCloseTimeout) {
			log.Warn("database connections still in use by a job that ignores its context; exiting without closing them",
				"waited", poolCloseTimeout)
		}
	}()

	rep, err := replica.New(replica.Config{DB: db, InstanceID: cfg.InstanceID, Log: base, JobSettings: settings,
		Jobs: cfg.Jobs, Metrics: m, APIToken: cfg.APIToken, APITokenNext: cfg.APITokenNext,
		ReadToken: cfg.APIReadToken, MetricsToken: cfg.MetricsToken, OIDC: cfg.OIDC, APIHosts: cfg.APIHosts, IdempotencyTTL: cfg.IdempotencyTTL,
		LeaseTimeout: cfg.LeaseTimeout, PollInterval: cfg.PollInterval, Version: version, HTTPAddr: cfg.HTTPAddr,
		Partitions: cfg.Partitions, Runtime: cfg.Runtime, RunRetention: settings.Retention.JobRuns, FailoverWindow: cfg.FailoverWindow,
		Notifications: cfg.Notifications, Tracing: traces})
	if err != nil {
		log.Error("cannot build the replica", "error", err)
		return exitFailure
	}
	listener, err := net.Listen("tcp", cfg.HTTPAddr)
	if err != nil {
		log.Error("cannot listen; is another process using the port? set SCHEDULER_HTTP_ADDR", "addr", cfg.HTTPAddr, "error", err)
		return exitFailure
	}
	server := api.NewHTTPServer(cfg.HTTPAddr, rep.Handler())
	// Requests (a ?wait trigger can last minutes) see the shutdown signal, so Shutdown is
	// not held up by them.
	server.BaseContext = func(net.Listener) context.Context { return ctx }
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		log.Info("http listening", "addr", listener.Addr().String(), "version", version)
		if err := server.Serve(listener); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("http server stopped", "error", err)
		}
	}()

	// Nothing runs before the schema is ours: no database, no leader, no job (fail closed).
	// On ctx's end the replica resigns at once, so a follower takes over while this one is
	// still draining HTTP.
	leading := make(chan struct{})
	if err := migrateUntilDone(ctx, cfg.DatabaseURL, log); err == nil {
		log.Info("schema ready", "version", store.SchemaVersion())
		if err := rep.CheckSQLTargets(ctx, log); err != nil {
			log.Error("a SQL target's login could reach the scheduler; not starting", "error", err)
			return exitFailure
		}
		if err := rep.EnsureCluster(ctx, db); err != nil {
			log.Error("cannot join the cluster; not starting", "error", err)
			return exitFailure
		}
		go func() { defer close(leading); rep.Run(ctx) }()
	} else {
		close(leading)
	}

	<-ctx.Done()
	log.Info("shutting down")
	shutdownCtx, cancel := context.WithTimeout(context.Background(), cfg.ShutdownTimeout)
	defer cancel()
	// Leadership is released first; runs are cancelled with their term, and a job body
	// that ignores its context cannot hold the exit beyond the shutdown timeout.
	select {
	case <-leading:
	case <-shutdownCtx.Done():
		log.Warn("jobs still running at the shutdown timeout; exiting anyway, the next leader recovers them")
	}
	if err := server.Shutdown(shutdownCtx); err != nil {
		log.Warn("http shutdown incomplete", "error", err)
	}
	wg.Wait()
	log.Info("stopped")
	return exitOK
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
