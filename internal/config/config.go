// Package config loads and validates the scheduler's configuration from the
// environment, once, at start. Every mistake is reported before anything
// runs, all at once, each naming the variable and how to fix it; cmd prints
// the error and exits 2.
package config

import (
	"fmt"
	"log/slog"
	"math"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// Defaults of the service-wide settings. They are defined here only: the packages that use
// them (store, leader, engine, api) take validated values. The exported ones are for code
// that builds those packages without loading the environment (tests, benchmarks) and for
// packages that fill in a setting left zero (leader, targets). The jobs' own settings and
// their defaults are internal/jobs' (settings.go); a runtime definition's, internal/runtimejob's.
const (
	httpAddrDefault       = "127.0.0.1:8080"
	logFormatDefault      = "json"
	LeaseTimeoutDefault   = 5 * time.Second
	IdempotencyTTLDefault = 24 * time.Hour
	// FailoverWindowDefault is how far before its election a leader that finds PostgreSQL
	// failed over catches up unrecorded slots instead of recording them missed.
	FailoverWindowDefault  = 5 * time.Minute
	PollIntervalDefault    = 2 * time.Second
	shutdownTimeoutDefault = 25 * time.Second
	// MaxPartitions bounds SCHEDULER_PARTITIONS (the check on scheduler_cluster.partitions).
	MaxPartitions = 1024
)

// The message pipeline's bounds (internal/jobs uses them too, for a pipeline built without
// a configuration, and to size the webhook's connection pool).
const (
	SendConcurrencyDefault = 16
	// MaxSendConcurrency bounds SCHEDULER_SEND_CONCURRENCY: each send in flight holds a
	// goroutine and, for the webhook, a connection to the receiver.
	MaxSendConcurrency = 1024
)

// NoShowGraceDefault is how long after its start a BOOKED appointment that was not checked in
// becomes a no-show (SCHEDULER_NO_SHOW_GRACE, no-show-detection).
const NoShowGraceDefault = 15 * time.Minute

// maxInstanceID keeps "scheduler:<id>" within PostgreSQL's 63-byte
// application_name: the server cuts longer names, and a new leader finds the
// old leader's backends by that name.
const maxInstanceID = 63 - len("scheduler:")

// Config is the validated configuration of one scheduler process.
type Config struct {
	DatabaseURL  string
	HTTPAddr     string
	InstanceID   string
	APIToken     string // required when HTTPAddr is not a loopback address
	APITokenNext string // accepted beside APIToken during a rotation
	APIReadToken string // may read every /v1 route and change nothing
	MetricsToken string // required on GET /metrics when set
	// APIHosts are the Host names besides loopback and localhost that a replica without a
	// token answers (SCHEDULER_API_HOSTS): anything else may be a DNS-rebinding page.
	APIHosts     []string
	LogLevel     slog.Level
	LogFormat    string // "json" or "text"
	LeaseTimeout time.Duration
	// Partitions is the number of partitions runtime jobs hash onto (SCHEDULER_PARTITIONS),
	// each led by one replica; fixed when the cluster is made, 1 is one leader for all.
	Partitions      int
	IdempotencyTTL  time.Duration
	FailoverWindow  time.Duration
	PollInterval    time.Duration // fallback polling for queued manual runs
	ShutdownTimeout time.Duration
	SendConcurrency int           // messages in flight at once on this replica, every sending job together
	SendRate        float64       // messages per second to the provider; 0: no bound
	NoShowGrace     time.Duration // no-show-detection: how long after its start an appointment not checked in is a no-show
	Jobs            []Job         // in the order of the defaults given to LoadJobs
	Runtime         Runtime
	OIDC            OIDC          // sign-in with an OIDC issuer's tokens; off when OIDC.Issuer is ""
	Notifications   Notifications // the jobs' notifications: console URL, coalescing interval
}

// DatabaseURL reads and checks DATABASE_URL alone, for the subcommands that
// need nothing else (migrate, seed). A problem is recorded on env.
func DatabaseURL(env *Env) string {
	const name = "DATABASE_URL"
	const want = "a PostgreSQL URL such as postgres://user:pass@localhost:5432/scheduler"
	v, ok := env.lookup(name)
	if !ok {
		env.Fail(name, "", want)
		return ""
	}
	if problem := checkDatabaseURL(v); problem != "" {
		// The value may hold a password: show it with the password hidden.
		env.Fail(name, redactPassword(v), want+" ("+problem+")")
		return ""
	}
	return v
}

// Load reads and checks the service-wide configuration; the jobs' part follows with
// LoadJobs, once the job registry (which needs the logger Load configures) is built.
// Problems are recorded on env, and LoadJobs reports them all at once with its own.
func Load(env *Env) *Config {
	c := &Config{
		DatabaseURL:     DatabaseURL(env),
		HTTPAddr:        env.String("SCHEDULER_HTTP_ADDR", httpAddrDefault),
		InstanceID:      env.String("SCHEDULER_INSTANCE_ID", defaultInstanceID()),
		APIToken:        env.String("SCHEDULER_API_TOKEN", ""),
		APITokenNext:    env.String("SCHEDULER_API_TOKEN_NEXT", ""),
		APIReadToken:    env.String("SCHEDULER_API_READ_TOKEN", ""),
		MetricsToken:    env.String("SCHEDULER_METRICS_TOKEN", ""),
		LeaseTimeout:    env.Duration("SCHEDULER_LEASE_TIMEOUT", LeaseTimeoutDefault),
		Partitions:      env.Int("SCHEDULER_PARTITIONS", 1),
		IdempotencyTTL:  env.Duration("SCHEDULER_IDEMPOTENCY_TTL", IdempotencyTTLDefault),
		FailoverWindow:  env.Duration("SCHEDULER_FAILOVER_WINDOW", FailoverWindowDefault),
		PollInterval:    env.Duration("SCHEDULER_POLL_INTERVAL", PollIntervalDefault),
		ShutdownTimeout: env.Duration("SCHEDULER_SHUTDOWN_TIMEOUT", shutdownTimeoutDefault),
		NoShowGrace:     env.Duration("SCHEDULER_NO_SHOW_GRACE", NoShowGraceDefault),
	}

	loadAPIAccess(env, c)
	if len(c.InstanceID) > maxInstanceID || !printableASCII(c.InstanceID) {
		env.Fail("SCHEDULER_INSTANCE_ID", c.InstanceID, fmt.Sprintf(
			"at most %d printable ASCII characters such as scheduler-1 (it becomes the PostgreSQL application_name scheduler:<id>)", maxInstanceID))
	}

	levels := map[string]slog.Level{"debug": slog.LevelDebug, "info": slog.LevelInfo, "warn": slog.LevelWarn, "error": slog.LevelError}
	level := env.String("SCHEDULER_LOG_LEVEL", "info")
	if l, ok := levels[strings.ToLower(level)]; ok {
		c.LogLevel = l
	} else {
		env.Fail("SCHEDULER_LOG_LEVEL", level, "one of debug, info, warn, error")
	}
	format := env.String("SCHEDULER_LOG_FORMAT", logFormatDefault)
	if c.LogFormat = strings.ToLower(format); c.LogFormat != "json" && c.LogFormat != "text" {
		env.Fail("SCHEDULER_LOG_FORMAT", format, "one of json, text")
	}

	// A lease under a second would make a healthy leader step down on every hiccup.
	atLeast(env, "SCHEDULER_LEASE_TIMEOUT", c.LeaseTimeout, time.Second, `a duration of at least 1s such as "5s"`)
	atLeast(env, "SCHEDULER_IDEMPOTENCY_TTL", c.IdempotencyTTL, 1, `a duration above 0 such as "24h"`)
	atLeast(env, "SCHEDULER_FAILOVER_WINDOW", c.FailoverWindow, time.Second, `a duration of at least 1s such as "5m"`)
	atLeast(env, "SCHEDULER_POLL_INTERVAL", c.PollInterval, 1, `a duration above 0 such as "2s"`)
	atLeast(env, "SCHEDULER_SHUTDOWN_TIMEOUT", c.ShutdownTimeout, 0, `a duration of 0 or more such as "25s"`)
	atLeast(env, "SCHEDULER_NO_SHOW_GRACE", c.NoShowGrace, 1, `a duration above 0 such as "15m"`)
	c.SendConcurrency, c.SendRate = loadSend(env)
	if c.Partitions < 1 || c.Partitions > MaxPartitions {
		env.Fail("SCHEDULER_PARTITIONS", env.String("SCHEDULER_PARTITIONS", ""),
			fmt.Sprintf("a whole number from 1 to %d such as 64 (set once, when the cluster is made)", MaxPartitions))
	}
	c.Runtime = loadRuntime(env)
	c.OIDC = loadOIDC(env)
	c.Notifications = loadNotifications(env, c.HTTPAddr)
	return c
}

// loadAPIAccess checks who may reach the API: the listening address against the token,
// the tokens against each other, and the extra Host names (SCHEDULER_API_HOSTS).
func loadAPIAccess(env *Env, c *Config) {
	loopback, ok := checkHTTPAddr(c.HTTPAddr)
	if !ok {
		env.Fail("SCHEDULER_HTTP_ADDR", c.HTTPAddr, "host:port such as 127.0.0.1:8080 or 0.0.0.0:8080")
	} else if !loopback && c.APIToken == "" {
		// Anyone who can reach the port could otherwise run and cancel jobs.
		env.Fail("SCHEDULER_API_TOKEN", "", fmt.Sprintf(
			"a bearer token because SCHEDULER_HTTP_ADDR=%q is reachable from other hosts (set a token, or bind 127.0.0.1:%s)",
			c.HTTPAddr, portOf(c.HTTPAddr)))
	}
	// Without the full token /v1 is open to all, so a read-only or next token would
	// protect nothing; and a read token equal to a full one would make every caller read-only.
	for _, name := range []string{"SCHEDULER_API_TOKEN_NEXT", "SCHEDULER_API_READ_TOKEN"} {
		if env.String(name, "") != "" && c.APIToken == "" {
			env.Fail("SCHEDULER_API_TOKEN", "", "a bearer token, because "+name+" is set (it only applies beside SCHEDULER_API_TOKEN)")
			break
		}
	}
	if c.APIReadToken != "" && (c.APIReadToken == c.APIToken || c.APIReadToken == c.APITokenNext) {
		env.Fail("SCHEDULER_API_READ_TOKEN", "(hidden)", "a token different from SCHEDULER_API_TOKEN and SCHEDULER_API_TOKEN_NEXT")
	}
	for _, h := range strings.Split(env.String("SCHEDULER_API_HOSTS", ""), ",") {
		if h = strings.ToLower(strings.TrimSpace(h)); h == "" {
			continue
		}
		if strings.ContainsAny(h, ":/ ") || !printableASCII(h) {
			env.Fail("SCHEDULER_API_HOSTS", h, "comma-separated host names without port, such as scheduler.internal,dev-box")
			continue
		}
		c.APIHosts = append(c.APIHosts, h)
	}
}

// loadSend reads the message pipeline's bounds.
func loadSend(env *Env) (concurrency int, perSecond float64) {
	concurrency = env.Int("SCHEDULER_SEND_CONCURRENCY", SendConcurrencyDefault)
	if concurrency < 1 || concurrency > MaxSendConcurrency {
		env.Fail("SCHEDULER_SEND_CONCURRENCY", env.String("SCHEDULER_SEND_CONCURRENCY", ""),
			fmt.Sprintf("a whole number from 1 to %d such as 16", MaxSendConcurrency))
		concurrency = SendConcurrencyDefault
	}
	if v := env.String("SCHEDULER_SEND_RATE", ""); v != "" {
		r, err := strconv.ParseFloat(v, 64)
		if err != nil || r < 0 || math.IsInf(r, 0) || math.IsNaN(r) {
			env.Fail("SCHEDULER_SEND_RATE", v, `messages per second, 0 (no bound) or more, such as "50" or "0.5"`)
			r = 0
		}
		perSecond = r
	}
	return concurrency, perSecond
}

func atLeast(env *Env, name string, d, min time.Duration, want string) {
	if d < min {
		value, _ := env.lookup(name)
		env.Fail(name, value, want)
	}
}

// checkHTTPAddr reports whether addr is a valid host:port and whether its
// host is a loopback address. An empty host (":8080") listens on every
// interface, so it is not loopback.
func checkHTTPAddr(addr string) (loopback, ok bool) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return false, false
	}
	if p, err := strconv.Atoi(port); err != nil || p < 0 || p > 65535 {
		return false, false
	}
	if host == "localhost" {
		return true, true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback(), true
}

func portOf(addr string) string {
	_, port, _ := net.SplitHostPort(addr)
	return port
}

// checkDatabaseURL returns what is wrong with a connection string, or "". pgx parses it
// as it will when connecting (pgconn.ParseConfig: URL or keyword/value, quoting, ports,
// sslmode), so nothing is accepted here that fails later for its form; whether the server
// accepts it is found out on connecting.
func checkDatabaseURL(s string) string {
	scheme, _, isURL := strings.Cut(s, "://")
	switch {
	case isURL && scheme != "postgres" && scheme != "postgresql":
		return "the scheme must be postgres:// or postgresql://"
	case !isURL && !strings.Contains(s, "="):
		return "neither a URL nor a keyword/value string such as host=localhost dbname=scheduler"
	}
	_, err := pgconn.ParseConfig(s)
	if err == nil {
		return ""
	}
	// pgconn's message names the string (redacted) and then what is wrong with it.
	_, reason, found := strings.Cut(err.Error(), "`: ")
	if !found {
		reason = "cannot be parsed"
	}
	if isURL {
		return "malformed URL: " + reason
	}
	return "malformed keyword/value string: " + reason
}

// redactPassword hides the password in a connection string, however malformed, so that an
// error message never prints it: it is shown as pgconn's own parse errors show it.
func redactPassword(s string) string {
	msg := pgconn.NewParseConfigError(s, "", nil).Error() // cannot parse `<redacted>`:
	msg = strings.TrimPrefix(msg, "cannot parse `")
	if i := strings.LastIndex(msg, "`: "); i >= 0 {
		return msg[:i]
	}
	return "(hidden: it may hold a password)"
}

func printableASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] > 0x7e {
			return false
		}
	}
	return true
}

// defaultInstanceID is "<hostname>-<pid>", unique across replicas and restarts.
// A long host name is cut from the left, keeping the end, which is where
// generated names (Kubernetes pods) differ.
func defaultInstanceID() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "scheduler"
	}
	id := fmt.Sprintf("%s-%d", host, os.Getpid())
	if len(id) > maxInstanceID {
		id = id[len(id)-maxInstanceID:]
	}
	return id
}
