// Package replica assembles one scheduler replica from its parts: the HTTP API, the leader
// elector, the business jobs and the run engine that runs them, on one store. `scheduler serve` runs it,
// and the tests that drive a whole replica (the CLI's, the dashboard's) start it in-process;
// both get the same wiring.
package replica

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/schedulerhq/scheduler/api"
	"github.com/schedulerhq/scheduler/internal/config"
	"github.com/schedulerhq/scheduler/internal/engine"
	"github.com/schedulerhq/scheduler/internal/idp"
	"github.com/schedulerhq/scheduler/internal/jobcontract"
	"github.com/schedulerhq/scheduler/internal/jobs"
	"github.com/schedulerhq/scheduler/internal/leader"
	"github.com/schedulerhq/scheduler/internal/logging"
	"github.com/schedulerhq/scheduler/internal/metrics"
	"github.com/schedulerhq/scheduler/internal/oidc"
	"github.com/schedulerhq/scheduler/internal/outbound"
	"github.com/schedulerhq/scheduler/internal/pglisten"
	"github.com/schedulerhq/scheduler/internal/runtimejob"
	"github.com/schedulerhq/scheduler/internal/secrets"
	"github.com/schedulerhq/scheduler/internal/store"
	"github.com/schedulerhq/scheduler/internal/targets"
	"github.com/schedulerhq/scheduler/internal/tracing"
)

// Config is what a replica is built from. The durations left zero take their parts'
// defaults; the rest is required.
type Config struct {
	DB         *store.DB
	InstanceID string
	// Log is the base logger; every part adds instance_id itself.
	Log *slog.Logger
	// JobSettings are the business jobs' own settings (jobs.LoadSettings); the replica
	// builds the jobs from them (jobs.Builtin).
	JobSettings jobs.Settings
	// Extra are jobs run beside the business ones (the tests' own).
	Extra []jobcontract.Job
	// Jobs are the validated job settings, one per job the replica runs, business or Extra.
	Jobs    []config.Job
	Metrics *metrics.Metrics // nil: none recorded

	// The API's tokens and host names (config's SCHEDULER_API_*).
	APIToken, APITokenNext, ReadToken string
	// MetricsToken guards GET /metrics (SCHEDULER_METRICS_TOKEN; "": open).
	MetricsToken string
	// OIDC signs in service accounts (off when OIDC.Issuer is "").
	OIDC           config.OIDC
	APIHosts       []string
	IdempotencyTTL time.Duration

	LeaseTimeout      time.Duration
	InstanceHeartbeat time.Duration
	// Partitions is config's SCHEDULER_PARTITIONS (0: 1); partitions 1..N-1 are elected by
	// the replica's leader.Partitions.
	Partitions   int
	PollInterval time.Duration
	// FailoverWindow is config's SCHEDULER_FAILOVER_WINDOW (0: its default).
	FailoverWindow time.Duration
	// Version and HTTPAddr describe the replica in scheduler_instances.
	Version, HTTPAddr string
	// Runtime configures the jobs users define at runtime (config's SCHEDULER_HTTP_*,
	// SCHEDULER_SQL_TARGET_*, SCHEDULER_SECRET_* with the key that seals stored secrets,
	// SCHEDULER_MAX_JOBS).
	Runtime config.Runtime
	// Notifications are the jobs' notifications' settings (SCHEDULER_PUBLIC_URL,
	// SCHEDULER_NOTIFY_INTERVAL); zero: their defaults.
	Notifications config.Notifications
	// TokenKeys tune the targets' OIDC token keys (internal/idp): zero fields take their
	// defaults, and DB, Box, Issuer and RotateEvery come from the fields above. Tests
	// shorten the pre-publication and the refresh.
	TokenKeys idp.Config
	// RunRetention is how long runs are kept (SCHEDULER_RETENTION_JOB_RUNS), and with them
	// the SQL targets' markers of the slots they committed; 0: 30 days.
	RunRetention time.Duration
	// Tracing exports the spans of claims, runs and their calls (OTEL_*); nil: off.
	Tracing *tracing.Tracing
}

// Replica is one assembled replica.
type Replica struct {
	handler    http.Handler
	sqlTargets *targets.SQLTargets
	notifier   *pglisten.Notifier
	elector    *leader.Elector
	partitions *leader.Partitions
	engine     *engine.Engine
	// partitionEngines lead partitions 1..N-1 when this replica holds them (partitions.go).
	partitionEngines []partitionEngine
	terms            *leader.Subscription
	callLimits       callLimits
	// partitionCount is SCHEDULER_PARTITIONS, checked against the cluster's by EnsureCluster.
	partitionCount int
}

// New builds the replica's parts without touching the database, so that its API can answer
// (/readyz 503) before the database is reachable and the schema migrated.
func New(c Config) (*Replica, error) {
	// The replica's one listening connection, for the elector, the engine and the API.
	notes := pglisten.New(c.DB, apiLog(c.Log, c.InstanceID))
	elector, err := leader.New(leader.Config{DB: c.DB, Notifier: notes, InstanceID: c.InstanceID, Log: c.Log,
		LeaseTimeout: c.LeaseTimeout, InstanceHeartbeat: c.InstanceHeartbeat, Version: c.Version,
		HTTPAddr: c.HTTPAddr, Metrics: c.Metrics, DrainTimeout: jobs.HandOverDrain, PollInterval: c.PollInterval})
	if err != nil {
		return nil, fmt.Errorf("the elector: %w", err)
	}
	partitions, err := leader.NewPartitions(leader.PartitionsConfig{DB: c.DB, Notifier: notes, InstanceID: c.InstanceID,
		Log: c.Log, Count: max(c.Partitions, 1), LeaseTimeout: c.LeaseTimeout, DrainTimeout: jobs.HandOverDrain, Metrics: c.Metrics})
	if err != nil {
		return nil, fmt.Errorf("the partitions' elections: %w", err)
	}
	guard, err := targets.NewGuard(c.Runtime.HTTPAllow)
	if err != nil {
		return nil, fmt.Errorf("SCHEDULER_HTTP_ALLOW: %w", err)
	}
	caller := targets.NewCaller(targets.Config{Guard: guard, Concurrency: c.Runtime.HTTPConcurrency,
		HostConcurrency: c.Runtime.HTTPHostConcurrency, JobConcurrency: c.Runtime.HTTPJobConcurrency, OnCall: c.Metrics.TargetCall})
	c.Metrics.ExportCallsWaiting(caller.Waiting)
	c.Metrics.ExportPartitions(func(ctx context.Context) (int, map[int]int64, error) {
		return c.DB.PartitionGauges(ctx, c.LeaseTimeout)
	})
	sqlTargets, err := buildSQLTargets(c)
	if err != nil {
		return nil, err
	}
	// data-retention keeps the days inside every job's catch-up window, which only the
	// engine knows (runtime jobs come and go), and the engine is built from the jobs: the
	// job asks the engine when it runs, long after New has set eng.
	var eng *engine.Engine
	business := jobs.Builtin(c.JobSettings, logging.ForInstance(c.Log, c.InstanceID), jobs.RunDays{
		CatchUpWindows: func() map[string]time.Duration { return catchUpWindows(c.DB, eng, apiLog(c.Log, c.InstanceID)) },
		Drop:           c.DB.DropRunDays,
	})
	registry := jobcontract.NewRegistry(append(business, c.Extra...)...)
	// One source of secrets, by namespace, for the leader's calls, its notifications and
	// the API's checks.
	// What each namespace's jobs may reach: its SQL targets, private hosts and the operator's
	// secrets an admin granted it; a target's password is no secret any job may name.
	surfaces := outbound.New(guard, sqlTargets, c.Runtime.Secrets, c.DB)
	secretSource := secrets.New(surfaces.OperatorSecrets(), c.Runtime.SecretBox, c.DB)
	notifications, err := buildNotifications(c, guard, secretSource, surfaces)
	if err != nil {
		return nil, err
	}
	// Every replica signs (as leader) and publishes the key set (to the targets' verifiers).
	tk := c.TokenKeys
	tk.DB, tk.Box, tk.Issuer, tk.Log = c.DB, c.Runtime.SecretBox, publicURL(c), apiLog(c.Log, c.InstanceID)
	if tk.RotateEvery == 0 {
		tk.RotateEvery = c.Runtime.OIDCKeyRotation
	}
	tokenKeys := idp.New(tk)
	engineConf := engine.Config{DB: c.DB, Notifier: notes, Registry: registry, Jobs: c.Jobs, InstanceID: c.InstanceID,
		Log: c.Log, PollInterval: c.PollInterval, Metrics: c.Metrics, FailoverWindow: c.FailoverWindow, PublicURL: publicURL(c),
		Runtime:       &runtimejob.Runtime{Caller: caller, Secrets: secretSource, SQLTargets: sqlTargets, Outbound: surfaces, Tokens: tokenKeys},
		Notifications: notifications, Tracing: c.Tracing, Gate: engine.NewGate(c.Runtime.RunConcurrency, c.Metrics)}
	if eng, err = engine.New(engineConf); err != nil {
		return nil, fmt.Errorf("the run engine: %w", err)
	}
	partitionEngines, err := buildPartitionEngines(engineConf, partitions, max(c.Partitions, 1))
	if err != nil {
		return nil, err
	}
	var identifier api.Identifier
	if c.OIDC.Issuer != "" {
		identifier = oidc.New(c.OIDC, nil, c.Log)
	}
	handler := api.NewServer(api.Config{OIDC: identifier, DB: c.DB, Notifier: notes, InstanceID: c.InstanceID, Log: apiLog(c.Log, c.InstanceID),
		LeaseTimeout: c.LeaseTimeout, Jobs: c.Jobs, APIToken: c.APIToken, APITokenNext: c.APITokenNext, ReadToken: c.ReadToken, MetricsToken: c.MetricsToken,
		APIHosts: c.APIHosts, IdempotencyTTL: c.IdempotencyTTL, Recorder: c.Metrics, Secrets: secretSource,
		Runtime: runtimejob.Env{CheckURL: guard.CheckURL, CheckNATSURL: guard.CheckNATSURL, SQLTarget: sqlTargets.Check},
		MaxJobs: c.Runtime.MaxJobs, Outbound: surfaces, TokenKeys: tokenKeys}).Handler()
	// Subscribed before Run, so the engine cannot miss the first term.
	return &Replica{handler: handler, sqlTargets: sqlTargets, notifier: notes, elector: elector, partitions: partitions, engine: eng,
		partitionEngines: partitionEngines,
		terms:            elector.Listen(), partitionCount: max(c.Partitions, 1),
		callLimits: callLimits{db: c.DB, caller: caller, every: c.PollInterval, log: apiLog(c.Log, c.InstanceID)}}, nil
}

// runRetentionDefault is SCHEDULER_RETENTION_JOB_RUNS's default, for a Config without it.
const runRetentionDefault = 30 * 24 * time.Hour

// buildSQLTargets makes the declared SQL targets; it connects to none.
func buildSQLTargets(c Config) (*targets.SQLTargets, error) {
	retention := c.RunRetention
	if retention <= 0 {
		retention = runRetentionDefault
	}
	var list []*targets.SQLTarget
	for name, t := range c.Runtime.SQLTargets {
		conn, err := store.ConnConfig(t.URL, store.Options{InstanceID: c.InstanceID, LeaseTimeout: c.LeaseTimeout})
		if err != nil {
			return nil, fmt.Errorf("SCHEDULER_SQL_TARGET_%s: %w", name, err)
		}
		list = append(list, targets.NewSQLTarget(targets.SQLTargetConfig{Name: name, Conn: conn,
			Connections: c.Runtime.SQLConnections, InstanceID: c.InstanceID, SchedulerLogin: c.DB.Login(),
			MarkerRetention: retention}))
	}
	return targets.NewSQLTargets(list...), nil
}

// EnsureCluster makes the cluster's partitioning on its first start, or refuses to start a
// replica whose SCHEDULER_PARTITIONS is not the cluster's (store.EnsureCluster). Call it
// once the schema is migrated, before Run.
func (r *Replica) EnsureCluster(ctx context.Context, db *store.DB) error {
	return db.EnsureCluster(ctx, r.partitionCount)
}

// CheckSQLTargets refuses, before the replica runs anything, a SQL target whose login could
// reach the scheduler (docs/operations.md, "SQL targets"). Call it once the schema is
// migrated, so the check sees the scheduler's tables.
func (r *Replica) CheckSQLTargets(ctx context.Context, log *slog.Logger) error {
	return r.sqlTargets.CheckAll(ctx, log)
}

// apiLog is the API's and the notifier's logger: they, unlike the elector and the engine,
// do not add instance_id to their lines themselves.
func apiLog(log *slog.Logger, id string) *slog.Logger {
	if log == nil {
		return nil
	}
	return logging.ForInstance(log, id)
}

// Handler is the replica's HTTP API and dashboard.
func (r *Replica) Handler() http.Handler { return r.handler }

// Listen subscribes to this replica's terms of leadership (tests await the first).
func (r *Replica) Listen() *leader.Subscription { return r.elector.Listen() }

// Run takes part in the election and, while this replica leads, runs the schedule, until ctx
// ends; then it resigns (letting its runs record what they did first) and returns once the
// elector and the engine have stopped. Call it once the schema is migrated.
func (r *Replica) Run(ctx context.Context) {
	// The namespaces' call bounds hold from the first call on: read before any term begins.
	r.callLimits.refresh(ctx)
	var wg sync.WaitGroup
	wg.Add(5)
	go func() { defer wg.Done(); r.callLimits.run(ctx) }()
	go func() { defer wg.Done(); r.partitions.Run(ctx) }()
	go func() { defer wg.Done(); r.notifier.Run(ctx) }()
	go func() { defer wg.Done(); r.engine.Run(ctx, r.terms.C()) }()
	go func() { defer wg.Done(); r.elector.Run(ctx) }()
	for _, pe := range r.partitionEngines {
		wg.Go(func() { pe.engine.Run(ctx, pe.terms.C()) })
	}
	wg.Wait()
}

// publicURL is the URL a callback job's target posts to, before /v1/runs/{id}/complete, and
// the issuer of the targets' OIDC tokens: SCHEDULER_PUBLIC_URL, which the notifications'
// links use too, else http://<HTTPAddr>.
func publicURL(c Config) string {
	if c.Notifications.PublicURL != "" {
		return c.Notifications.PublicURL
	}
	return "http://" + c.HTTPAddr
}
