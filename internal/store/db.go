// Package store wraps PostgreSQL: the connection pool and its session settings, migrations,
// the fenced transaction every job write goes through, and the scheduler's own queries.
//
// Callers use one style: named queries (Executor, in executor.go) on the pool-backed *DB or,
// inside a fenced transaction, on *Tx. Files are grouped by the table they query: runs*.go
// (job_runs), settings.go (job_settings), leader.go (scheduler_leader and the leader's lock
// session), instances.go, idempotency.go, locks.go (pg_locks). The pool itself never leaves
// the package.
package store

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"golang.org/x/sys/unix"
)

// Options say who is connecting and how fast a vanished peer must be noticed.
type Options struct {
	// InstanceID names the replica; it becomes application_name "scheduler:<id>", which the
	// next leader uses to find and terminate a deposed leader's backends.
	InstanceID string
	// LeaseTimeout bounds how long either side of a broken connection may keep believing in
	// it; above 0 (config.Load validates SCHEDULER_LEASE_TIMEOUT).
	LeaseTimeout time.Duration
	// MaxConns caps the pool: default the URL's pool_max_conns when it has one, else 10.
	MaxConns int32
	// Tracer, when set, sees every statement on every connection, before it is sent: the
	// seam through which tests inject transient faults (a connection reset at a claim, a
	// job transaction or a finish). Production leaves it nil.
	Tracer pgx.QueryTracer
}

const (
	defaultMaxConns = 10
	// ApplicationNamePrefix starts every scheduler connection's application_name.
	ApplicationNamePrefix = "scheduler:"
)

// DB is the scheduler's handle on PostgreSQL. Its named queries (Executor) each run on a
// pooled connection; several statements that must commit together are either one named
// query that opens its own transaction (TriggerManualRun) or run in Fenced.
type DB struct {
	queries
	pool *pgxpool.Pool
	// readOnly is the pool job bodies read through outside the fence: its sessions start
	// with default_transaction_read_only on, so a write through it fails on the server
	// instead of committing unfenced (docs/design.md guarantee 1).
	readOnly *pgxpool.Pool
	conf     *pgx.ConnConfig
}

// Open builds a pool whose every connection carries the session settings of connConfig.
// It does not wait for the database: a replica must start (and answer /readyz 503) while
// PostgreSQL is down, and connect once it is back.
func Open(ctx context.Context, databaseURL string, opts Options) (*DB, error) {
	conf, err := connConfig(databaseURL, opts)
	if err != nil {
		return nil, err
	}
	poolConf, err := pgxpool.ParseConfig(databaseURL)
	if err != nil {
		return nil, fmt.Errorf("parse DATABASE_URL: %w", err)
	}
	poolConf.ConnConfig = conf
	// An operator's pool_max_conns in DATABASE_URL is obeyed, not overwritten: a replica
	// leading many partitions may need more than the default.
	switch {
	case opts.MaxConns > 0:
		poolConf.MaxConns = opts.MaxConns
	case !strings.Contains(databaseURL, "pool_max_conns="):
		poolConf.MaxConns = defaultMaxConns
	}
	poolConf.HealthCheckPeriod = 10 * time.Second
	pool, err := pgxpool.NewWithConfig(ctx, poolConf)
	if err != nil {
		return nil, fmt.Errorf("open pool: %w", err)
	}
	readConf := poolConf.Copy()
	readConf.ConnConfig.RuntimeParams["default_transaction_read_only"] = "on"
	readOnly, err := pgxpool.NewWithConfig(ctx, readConf)
	if err != nil {
		pool.Close()
		return nil, fmt.Errorf("open read-only pool: %w", err)
	}
	return &DB{queries: queries{pool}, pool: pool, readOnly: readOnly, conf: conf}, nil
}

// Close closes the pools.
func (db *DB) Close() {
	db.pool.Close()
	db.readOnly.Close()
}

// Reader is raw read access for a job body's own SQL outside the fence (streaming candidate
// ids before the fenced batch that changes them): jobs.Querier.
type Reader interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// Login is the scheduler's own PostgreSQL login (DATABASE_URL's user).
func (db *DB) Login() string { return db.conf.User }

// ReadOnly is the pool for reads outside the fence (a job's candidate ids). Every
// transaction on it is READ ONLY unless the caller explicitly asks otherwise, so an
// accidental write through it fails with SQLSTATE 25006 rather than committing unfenced.
// Its connections are opened only when used, so followers hold none.
func (db *DB) ReadOnly() Reader { return db.readOnly }

// connect opens one connection outside the pool with the same settings, for sessions whose
// state must not be shared: the leader's lock session and the notifier's listening one.
func (db *DB) connect(ctx context.Context) (*pgx.Conn, error) {
	return pgx.ConnectConfig(ctx, db.conf.Copy())
}

// ControlTables matches the names of the scheduler's own tables and sequences (a POSIX
// regular expression, as PostgreSQL's ~ reads it): the leader row, runs and their day
// partitions, definitions, settings, the audit log, control messages, the migrations' record.
// No SQL target's login may hold a privilege on one of them. The application's tables beside
// them (members, appointments, ...) are not in it; TestControlTablesNameEveryTable keeps the
// two lists whole.
const ControlTables = `^(scheduler_|job_runs|job_definitions|job_settings|run_attempts|operator_actions|idempotency_keys|schema_migrations)`

// ConnConfig is connConfig for connections that are not the scheduler's own (SQL targets'):
// the same settings that bound a partition, with application_name left to the caller.
func ConnConfig(databaseURL string, opts Options) (*pgx.ConnConfig, error) {
	conf, err := connConfig(databaseURL, opts)
	if err != nil {
		return nil, err
	}
	delete(conf.RuntimeParams, "application_name")
	return conf, nil
}

// connConfig parses the URL and adds the settings that bound a partition (docs/design.md
// guarantee 8). The server-side ones are PostgreSQL GUCs sent as startup parameters, so the
// *server* drops the backends of a replica that vanished, within about the lease; the
// client-side ones make this replica notice a vanished server just as fast.
func connConfig(databaseURL string, opts Options) (*pgx.ConnConfig, error) {
	conf, err := parseConfig(databaseURL)
	if err != nil {
		return nil, err
	}
	lease := opts.LeaseTimeout
	if lease <= 0 {
		return nil, fmt.Errorf("store: lease timeout %s must be above 0", lease)
	}
	idle := max(lease/3, time.Second)
	params := map[string]string{
		"application_name":                    ApplicationNamePrefix + opts.InstanceID,
		"tcp_keepalives_idle":                 strconv.Itoa(int(idle / time.Second)),
		"tcp_keepalives_interval":             "1",
		"tcp_keepalives_count":                "2",
		"tcp_user_timeout":                    strconv.Itoa(int(lease / time.Millisecond)),
		"idle_in_transaction_session_timeout": strconv.Itoa(int(lease / time.Millisecond)),
	}
	for k, v := range params {
		conf.RuntimeParams[k] = v
	}

	dialer := &net.Dialer{
		Timeout: lease,
		KeepAliveConfig: net.KeepAliveConfig{
			Enable: true, Idle: idle, Interval: time.Second, Count: 2,
		},
		Control: func(network, address string, c syscall.RawConn) error {
			if network != "tcp" && network != "tcp4" && network != "tcp6" {
				return nil
			}
			var sockErr error
			err := c.Control(func(fd uintptr) {
				sockErr = unix.SetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_USER_TIMEOUT, int(lease/time.Millisecond))
			})
			return errors.Join(err, sockErr)
		},
	}
	conf.DialFunc = dialer.DialContext
	conf.ConnectTimeout = lease
	conf.Tracer = opts.Tracer
	return conf, nil
}

// parseConfig parses DATABASE_URL for one connection. pgxpool's settings in it
// (pool_max_conns, ...) are the pool's, never the server's, which refuses a parameter it
// does not know.
func parseConfig(databaseURL string) (*pgx.ConnConfig, error) {
	conf, err := pgx.ParseConfig(databaseURL)
	if err != nil {
		return nil, fmt.Errorf("parse DATABASE_URL: %w", err)
	}
	for k := range conf.RuntimeParams {
		if strings.HasPrefix(k, "pool_") {
			delete(conf.RuntimeParams, k)
		}
	}
	return conf, nil
}
