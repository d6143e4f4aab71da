package targets

// SQL targets: the databases runtime SQL jobs run in, each reached with a login of its own
// (SCHEDULER_SQL_TARGET_<NAME>).
//
// A job's statements are another team's text. They never share a connection, a transaction
// or a login with the scheduler: whatever they do to their session (rename it, trap cancels,
// take advisory locks, LISTEN, NOTIFY, SET anything) happens in a session that exists for
// this one run and is closed after it. What keeps them from the scheduler's own tables is
// the target's login, which checkLogin refuses when it could reach them.
//
// Exactly once per slot without sharing the scheduler's transaction: the statements commit
// in a transaction that also inserts the slot's key (the Idempotency-Key the slot would
// carry) into the login's own marker table in the target (sqlmarkers.go). A later run of the
// same slot (a retry, a recovery after a leader died, a catch-up) that finds the key commits
// nothing and reports the run that did; two runs of one slot at once serialise on the key's
// unique index, and the second rolls back. The scheduler records the run after the target's
// commit, so a crash in between leaves a run that its recovery finds applied. The statements
// may not end that transaction (sqllex.go), nor change their login (checkTransaction), and
// their session's settings are the runner's whatever the role says (sessionConfig).
//
// A hard timeout: a busy backend does not read its socket, so closing the client side does
// not stop it, and a PL/pgSQL loop may trap the cancel that statement_timeout sends. At the
// deadline the runner cancels the backend by the pid it recorded at connect, terminates it
// two seconds later through a connection of the same login (a role may signal its own
// backends), and returns only once pg_stat_activity no longer shows it.

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/schedulerhq/scheduler/internal/testsignal"
)

const (
	// SQLConnectionsDefault bounds a target's runs at once (SCHEDULER_SQL_CONNECTIONS).
	SQLConnectionsDefault = 4
	// sqlTerminateAfter is how long a cancelled backend has to end its statement before it
	// is terminated.
	sqlTerminateAfter = 2 * time.Second
	// sqlGoneWithin bounds the wait for a terminated backend to leave pg_stat_activity.
	sqlGoneWithin = 2500 * time.Millisecond
	// sqlGonePoll is how often that wait looks: there is no event to await.
	sqlGonePoll = 50 * time.Millisecond
	// sqlCancelEvery is how often a cancel is sent again until the statements end: the
	// server drops a cancel that lands while the backend waits for its next statement.
	sqlCancelEvery = 200 * time.Millisecond
	// sqlCleanupTimeout bounds a rollback, a goodbye or a trial after the run's own context
	// has ended.
	sqlCleanupTimeout = time.Second
	// sqlCheckTimeout bounds each statement of a check's session (Check).
	sqlCheckTimeout = 10 * time.Second
	// sqlIdleInTransaction is the server's bound on a run's idle transaction when the
	// target's connection config sets none.
	sqlIdleInTransaction = 5 * time.Second
	// ApplicationNameJobPrefix starts the application_name of a job's connection:
	// scheduler-job:<instance>:<run id>. It is a label for people reading
	// pg_stat_activity; the runner itself goes by the backend's pid.
	ApplicationNameJobPrefix = "scheduler-job:"
)

// ErrTargetRefused wraps the reason a target's login may not run jobs (CheckLogin).
var ErrTargetRefused = errors.New("the SQL target's login could reach the scheduler")

// SQLTargetConfig declares one target.
type SQLTargetConfig struct {
	// Name is the <NAME> of SCHEDULER_SQL_TARGET_<NAME>, upper-case.
	Name string
	// Conn is the target's connection config (login, password, host, database), with the
	// session settings that bound a partition (store.ConnConfig); application_name is set
	// per run.
	Conn *pgx.ConnConfig
	// Connections bounds the target's runs at once (0: SQLConnectionsDefault).
	Connections int
	// InstanceID names this replica in the runs' application_name.
	InstanceID string
	// SchedulerLogin is the scheduler's own login, which the target's must neither be nor hold.
	SchedulerLogin string
	// MarkerRetention is how long a slot's marker is kept (the runs' retention).
	MarkerRetention time.Duration
}

// SQLTarget is a declared target: its connection settings and the bound on its runs. Each
// run opens a connection of its own and closes it, so nothing one run leaves in its session
// (a setting, a temporary table shadowing scheduler_sql_runs, a prepared statement, a lock)
// reaches the next.
type SQLTarget struct {
	conf  SQLTargetConfig
	slots chan struct{}
	// markers is the login's marker table (markersTable), sql the runner's statements on it.
	markers string
	sql     sqlStatements
	// roleSettings are the login's role settings as the first check found them (checkLogin).
	roleSettings roleSettings
	// terminateAfter is sqlTerminateAfter; a test lengthens it to tell a cancel that worked
	// from the terminate that follows one that did not.
	terminateAfter time.Duration
	// beforeStatements, when a test sets it, runs just before the statements are sent;
	// cancelSent reports each cancel request stop sent. Together they land a cancel in the
	// gap between two of the runner's statements.
	beforeStatements func()
	cancelSent       testsignal.Signal[struct{}]
}

// NewSQLTarget makes a target; it connects to nothing.
func NewSQLTarget(c SQLTargetConfig) *SQLTarget {
	if c.Connections <= 0 {
		c.Connections = SQLConnectionsDefault
	}
	c.Conn = c.Conn.Copy()
	// Unnamed statements only: after the job's statements, a statement the scheduler sends
	// must not be one they PREPAREd under the name of pgx's statement cache.
	c.Conn.DefaultQueryExecMode = pgx.QueryExecModeExec
	markers := markersTable(c.Conn.User)
	return &SQLTarget{conf: c, slots: make(chan struct{}, c.Connections), terminateAfter: sqlTerminateAfter,
		markers: markers, sql: newSQLStatements(markers)}
}

// Name is the target's <NAME>.
func (t *SQLTarget) Name() string { return t.conf.Name }

// Login is the login the target's connections use.
func (t *SQLTarget) Login() string { return t.conf.Conn.User }

// SQLRun is one run of a SQL job's statements.
type SQLRun struct {
	// Key is the slot's Idempotency-Key (or the manual run's): the marker of its commit.
	Key string
	Job string
	// RunID and ScheduledAt (zero for a manual run) are what the statements may read
	// (current_setting('scheduler.run_id'), 'scheduler.scheduled_at').
	RunID       int64
	ScheduledAt time.Time
	// Statements are one or more statements separated by ';' (untrusted text), run by the
	// server as one text; this package only refuses those that would end the run's
	// transaction (TransactionControl).
	Statements string
	// River, when set, is what runs instead of Statements: River's insert of one job, with
	// the slot in its metadata (river.go).
	River *RiverJob
	// Vars are a trigger's inputs, read by the statements as
	// current_setting('scheduler.var.<name>') (names checked by the API).
	Vars map[string]string
	// Timeout is the statements' statement_timeout, a first courtesy; the run's context is
	// what ends them for sure.
	Timeout time.Duration
	// Connected, when set, is told the run's backend (its pid and start) before the
	// statements run, so that a later leader can end it if this replica dies; its error
	// ends the run before anything ran.
	Connected func(ctx context.Context, pid uint32, backendStart time.Time) error
}

// SQLResult says what a run did.
type SQLResult struct {
	// Statements is how many statements ran; RowsAffected the last one's row count.
	Statements   int
	RowsAffected int64
	// AppliedBy is set when the slot's marker was already there: the statements committed
	// in an earlier run (this one, AppliedBy), and ran no second time.
	AppliedBy int64
	// River is what a River run's insert did.
	River RiverInserted
}

// Run runs r in the target and returns once its backend is gone or idle: when ctx ends
// first (the job's timeout, a cancel, the end of the term), the backend is cancelled, then
// terminated, and the error wraps context.Cause(ctx). A run whose commit succeeded reports
// success even if ctx ended just after.
func (t *SQLTarget) Run(ctx context.Context, r SQLRun) (SQLResult, error) {
	// A definition stored before the check existed is read again here.
	if err := TransactionControlError(r.Statements); r.River == nil && err != nil {
		return SQLResult{}, fmt.Errorf("SQL target %s refuses the statements: %w", t.conf.Name, err)
	}
	select {
	case t.slots <- struct{}{}:
	case <-ctx.Done():
		return SQLResult{}, fmt.Errorf("waiting for a connection to SQL target %s (SCHEDULER_SQL_CONNECTIONS): %w", t.conf.Name, context.Cause(ctx))
	}
	defer func() { <-t.slots }()

	conn, err := t.connect(ctx, strconv.FormatInt(r.RunID, 10), r.Timeout)
	if err != nil {
		return SQLResult{}, err
	}
	defer func() {
		closeCtx, cancel := context.WithTimeout(context.Background(), sqlCleanupTimeout)
		defer cancel()
		_ = conn.Close(closeCtx)
	}()
	pid := conn.PgConn().PID()
	if r.Connected != nil {
		var started time.Time
		if err := conn.QueryRow(ctx, `SELECT backend_start FROM pg_catalog.pg_stat_activity WHERE pid = pg_catalog.pg_backend_pid()`).Scan(&started); err != nil {
			return SQLResult{}, fmt.Errorf("SQL target %s: read the run's backend: %w", t.conf.Name, err)
		}
		if err := r.Connected(ctx, pid, started); err != nil {
			return SQLResult{}, err
		}
	}

	// The statements run under execCtx, not ctx: pgx would answer the end of ctx by closing
	// the socket, which a busy backend never notices. stop ends the backend on the server
	// first; execCtx then ends only a client still stuck on a dead link.
	execCtx, cancelExec := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelExec()
	applied := make(chan struct{})
	stopped := make(chan error, 1)
	go func() {
		select {
		case <-ctx.Done():
			stopped <- t.stop(conn.PgConn(), pid, applied)
			cancelExec()
		case <-applied:
			stopped <- nil
		}
	}()
	spanCtx, span := t.traceSQL(execCtx)
	res, err := t.apply(spanCtx, conn, r)
	endSQL(span, res, err)
	close(applied)
	stopErr := <-stopped
	if err == nil {
		return res, nil
	}
	if ctx.Err() != nil {
		return res, errors.Join(fmt.Errorf("SQL target %s: the statements were stopped: %w", t.conf.Name, context.Cause(ctx)), stopErr)
	}
	return res, err
}

// stop ends the backend pid of a run whose context ended: a cancel, and if the statement
// is still running after terminateAfter (applied not closed), a terminate and a wait for the
// backend to leave pg_stat_activity.
//
// The cancel is sent again every sqlCancelEvery until then. The server drops a cancel that
// arrives while the backend waits for its next statement, so one sent while the runner was
// between its own statements (the marker lookup, BEGIN, the settings) would let the job's
// statements that follow run to their end.
func (t *SQLTarget) stop(pc *pgconn.PgConn, pid uint32, applied <-chan struct{}) error {
	terminate := time.After(t.terminateAfter)
	again := time.NewTicker(sqlCancelEvery)
	defer again.Stop()
	for {
		cancelCtx, cancel := context.WithTimeout(context.Background(), sqlCleanupTimeout)
		_ = pc.CancelRequest(cancelCtx) // no answer to wait for; the terminate is the sure way
		cancel()
		t.cancelSent.Send(struct{}{})
		select {
		case <-applied:
			return nil // the cancel ended the statement; closing the connection ends the backend
		case <-terminate:
			return t.terminate(pid)
		case <-again.C:
		}
	}
}

// EndBackend ends the backend pid that started at started, if it still runs: a run's that a
// replica which died left behind. It returns once the backend is gone.
func (t *SQLTarget) EndBackend(pid uint32, started time.Time) error {
	return t.end(pid, started)
}

// terminate ends backend pid through a new connection of the target's login and waits until
// pg_stat_activity no longer shows it.
func (t *SQLTarget) terminate(pid uint32) error {
	return t.end(pid, time.Time{})
}

// end terminates backend pid (the one that started at started, unless that is zero) and
// waits until pg_stat_activity no longer shows it.
func (t *SQLTarget) end(pid uint32, started time.Time) error {
	ctx, cancel := context.WithTimeout(context.Background(), sqlCleanupTimeout+sqlGoneWithin)
	defer cancel()
	conn, err := t.connect(ctx, "stop", sqlCleanupTimeout)
	if err != nil {
		return fmt.Errorf("terminate backend %d: %w", pid, err)
	}
	defer func() { _ = conn.Close(context.WithoutCancel(ctx)) }()
	var since *time.Time // NULL: any backend with the pid
	if !started.IsZero() {
		since = &started
	}
	const terminate = `SELECT pg_catalog.pg_terminate_backend(pid) FROM pg_catalog.pg_stat_activity
		WHERE pid = $1 AND ($2::timestamptz IS NULL OR backend_start = $2)`
	if _, err := conn.Exec(ctx, terminate, int64(pid), since); err != nil {
		return fmt.Errorf("SQL target %s: terminate backend %d: %w", t.conf.Name, pid, err)
	}
	for {
		var alive bool
		err := conn.QueryRow(ctx, `SELECT EXISTS (SELECT FROM pg_catalog.pg_stat_activity
			WHERE pid = $1 AND ($2::timestamptz IS NULL OR backend_start = $2))`, int64(pid), since).Scan(&alive)
		switch {
		case err != nil:
			return fmt.Errorf("SQL target %s: watch backend %d end: %w", t.conf.Name, pid, err)
		case !alive:
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("SQL target %s: backend %d still runs %s after it was terminated", t.conf.Name, pid, sqlGoneWithin)
		case <-time.After(sqlGonePoll):
		}
	}
}

// execStatements sends text as one simple-protocol query, so that the server, not a splitter
// of ours, decides where statements end, and reads every result, discarding rows as they
// come so that a large SELECT costs no memory. It returns how many statements ran and the
// last one's row count.
func execStatements(ctx context.Context, pc *pgconn.PgConn, text string) (n int, rows int64, err error) {
	mrr := pc.Exec(ctx, text)
	for mrr.NextResult() {
		rr := mrr.ResultReader()
		for rr.NextRow() {
		}
		tag, err := rr.Close()
		if err != nil {
			_ = mrr.Close()
			return n, rows, err
		}
		n++
		rows = tag.RowsAffected()
	}
	return n, rows, mrr.Close()
}

// millis is d as a PostgreSQL duration in whole milliseconds, rounded up: statement_timeout
// 0 would mean no limit at all.
func millis(d time.Duration) string {
	return strconv.FormatInt(int64((max(d, time.Millisecond)+time.Millisecond-1)/time.Millisecond), 10) + "ms"
}

// isUndefinedTable reports a missing table or schema.
func isUndefinedTable(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && (pgErr.Code == "42P01" || pgErr.Code == "3F000")
}
