package targets

// The SQL runner of runtime SQL jobs: a user's statements, run in the transaction that
// records the run's finish, with the privileges of SCHEDULER_SQL_ROLE and nothing more.
//
// That transaction is the scheduler's own, on the scheduler's own login, so the threat is the
// statements leaving their role. SET LOCAL ROLE alone would not hold them: RESET ROLE, SET
// ROLE, set_config('role', ...) or SET SESSION AUTHORIZATION take them back to the login,
// and with it to the scheduler's tables (job_runs, scheduler_leader). PostgreSQL forbids
// changing role and session_authorization inside a SECURITY DEFINER function, so the
// statements run inside one owned by the role. Three further ways out had to be closed, each
// tried against a real server (sql_test.go):
//
//   - The owner of a function may ALTER it to SECURITY INVOKER, or replace its body; the next
//     call then runs with the caller's privileges, the scheduler's. A function the role owns
//     for longer than one call is therefore a way out, however it was made. So each run
//     creates its own, in the session's temporary schema, inside the caller's transaction,
//     and drops it before RunSQL returns: no other session ever sees it, and what the
//     statements do to it ends with the run.
//   - A plain SET inside a function outlives the function and, once committed, the
//     transaction, on a pooled connection that the scheduler goes on using:
//     search_path = a schema of the role's (whose operators and functions the scheduler would
//     then call with its own privileges), application_name (which hides the backend from a
//     new leader's fencing), idle_in_transaction_session_timeout, synchronous_commit.
//     RunSQL puts back every setting the statements changed, in the very statement that ran
//     them, so no round trip, and no lost connection, comes between. While they run, a
//     changed application_name does hide the backend, until statement_timeout ends them at
//     the latest; the fence holds regardless, since the transaction keeps its share lock on
//     the leader row, so a new leader's epoch waits for it.
//   - Temporary tables and types are looked up before pg_catalog and public, so a temporary
//     job_runs would stand in for the real one in the scheduler's next statements; PREPARE,
//     DEALLOCATE and session-level advisory locks are not undone by a rollback at all, and a
//     statement PREPAREd under the name of one of pgx's cached statements would be executed
//     by the scheduler, as itself. RunSQL discards the session's temporary objects, releases
//     its session-level advisory locks, and closes the connection if its prepared statements
//     changed.

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

const (
	// sqlLockTimeoutDefault bounds a statement's wait for a lock when SQLRun.LockTimeout is
	// 0: a SQL job queued behind a long lock would otherwise hold its run, and the fence's
	// share lock on the leader row, for the whole of its timeout.
	sqlLockTimeoutDefault = 5 * time.Second
	// sqlTrialTimeout bounds PrepareSQLRole's trial run.
	sqlTrialTimeout = 10 * time.Second
	// sqlCloseTimeout bounds the goodbye to a connection RunSQL gives up on.
	sqlCloseTimeout = time.Second
)

// SQLRun is one run of a SQL job's statements.
type SQLRun struct {
	// Role is SCHEDULER_SQL_ROLE: the statements run with this role's privileges only.
	Role string
	// Statements are one or more statements separated by ';' (user text, untrusted). The
	// server parses them, never this package.
	Statements string
	// Timeout is the statements' statement_timeout (the job's timeout); above 0.
	Timeout time.Duration
	// LockTimeout is the statements' lock_timeout (0: 5s).
	LockTimeout time.Duration
	Job         string
	RunID       int64
	ScheduledAt time.Time // zero for manual runs
}

// SQLResult says what the statements did.
type SQLResult struct {
	// RowsAffected is the row count of the last statement (GET DIAGNOSTICS ROW_COUNT):
	// PL/pgSQL's EXECUTE reports no other, and the text is run by one EXECUTE so that the
	// server, not a splitter of ours, decides where statements end. 0 when the last statement
	// reports no rows (REFRESH MATERIALIZED VIEW, CREATE INDEX).
	RowsAffected int64
	// Statements is how many statements the text holds, counted the way psql splits a script
	// (quotes, comments, dollar quotes, BEGIN ATOMIC bodies); a count, not what ran them.
	Statements int
}

// createSQLFunctionsSQL creates the two functions of one run in the session's temporary
// schema, where no other session can see or call them. DISCARD TEMP (discardSQL) drops them
// before RunSQL returns.
//
// scheduler_sql_run is the statements' function: owned by the role (scheduler_sql_call hands
// it over) and SECURITY DEFINER, so they run as the role, and PostgreSQL refuses any change of
// role or session authorization from inside it ("cannot set parameter "role" within
// security-definer function"). EXECUTE without USING gives the text to SPI_execute, which
// parses it with the server's own parser and runs each statement in turn (the SPI
// documentation: "You can pass multiple commands in one string"), each planned when its turn
// comes, so a statement may use a table an earlier one created. ROW_COUNT is the last
// statement's. The role owns this function and may change it, even while it runs: that
// changes nothing, since this call is already running as the role, and the function is
// dropped with the run.
//
// EXECUTE stays granted to PUBLIC on the run function, through which the login calls it once
// the role owns it: no other session can reach it.
//
// scheduler_sql_call is the scheduler's side, owned by the login: the role cannot change it.
// It hands the run function to the role, calls it in a block whose error undoes the
// statements (a subtransaction), and then, in the same statement, undoes what they could
// leave in the session: every setting back to the value in settings (taken before the run),
// session-level advisory locks released, and whether the prepared statements changed. Once
// the statements have run, nothing it names is looked up through their search_path: it
// first sets search_path to pg_catalog with pg_temp last, the form PostgreSQL recommends for
// a function that must not be subverted, and restores the caller's last.
const createSQLFunctionsSQL = `
CREATE FUNCTION pg_temp.scheduler_sql_run(statements text) RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER AS $run$
DECLARE
    n bigint;
BEGIN
    EXECUTE statements;
    GET DIAGNOSTICS n = ROW_COUNT;
    RETURN n;
END
$run$;

CREATE FUNCTION pg_temp.scheduler_sql_call(
    sql_role text, statements text, settings jsonb,
    OUT rows_affected bigint, OUT err_code text, OUT err_message text, OUT err_detail text,
    OUT err_hint text, OUT err_where text, OUT err_schema text, OUT err_table text,
    OUT err_column text, OUT err_datatype text, OUT err_constraint text,
    OUT prepared_changed boolean, OUT user_after text)
LANGUAGE plpgsql AS $call$
DECLARE
    prepared_before text[];
    changed text[];
    setting_name text;
BEGIN
    -- Guard: a role that is a superuser, or holds the login's privileges, confines nothing.
    IF NOT EXISTS (SELECT FROM pg_catalog.pg_roles WHERE rolname = sql_role) THEN
        RAISE EXCEPTION 'role "%" does not exist', sql_role USING ERRCODE = 'undefined_object';
    END IF;
    IF (SELECT rolsuper FROM pg_catalog.pg_roles WHERE rolname = sql_role)
       OR pg_catalog.pg_has_role(sql_role, current_user, 'USAGE') THEN
        RAISE EXCEPTION 'role "%" cannot confine SQL jobs: it is a superuser or has the privileges of "%"',
            sql_role, current_user USING ERRCODE = 'insufficient_privilege';
    END IF;
    EXECUTE pg_catalog.format('ALTER FUNCTION pg_temp.scheduler_sql_run(text) OWNER TO %I', sql_role);

    prepared_before := ARRAY(SELECT p.name || ' ' || p.prepare_time || ' ' || p.from_sql
                             FROM pg_catalog.pg_prepared_statements p ORDER BY 1);

    -- Run: the statements, as the role. An error (a timeout included) rolls them back and is
    -- returned as columns, so that the clean-up below runs whatever they did.
    BEGIN
        rows_affected := pg_temp.scheduler_sql_run(statements);
    EXCEPTION WHEN OTHERS OR query_canceled OR assert_failure THEN
        GET STACKED DIAGNOSTICS
            err_code = RETURNED_SQLSTATE, err_message = MESSAGE_TEXT, err_detail = PG_EXCEPTION_DETAIL,
            err_hint = PG_EXCEPTION_HINT, err_where = PG_EXCEPTION_CONTEXT, err_schema = SCHEMA_NAME,
            err_table = TABLE_NAME, err_column = COLUMN_NAME, err_datatype = PG_DATATYPE_NAME,
            err_constraint = CONSTRAINT_NAME;
    END;

    -- Settings: each one the statements changed (SET or SET LOCAL) goes back, for the rest of
    -- the transaction and, after commit, of the session.
    PERFORM pg_catalog.set_config('search_path', 'pg_catalog, pg_temp', false);
    changed := ARRAY(SELECT s.name FROM pg_catalog.pg_settings s
                     JOIN pg_catalog.jsonb_each_text(settings) b ON b.key = s.name
                     WHERE s.setting IS DISTINCT FROM b.value AND s.name <> 'search_path');
    FOREACH setting_name IN ARRAY changed LOOP
        PERFORM pg_catalog.set_config(setting_name, settings ->> setting_name, false);
    END LOOP;

    -- What no rollback undoes: session-level advisory locks, prepared statements.
    PERFORM pg_catalog.pg_advisory_unlock_all();
    prepared_changed := prepared_before IS DISTINCT FROM
        ARRAY(SELECT p.name || ' ' || p.prepare_time || ' ' || p.from_sql
              FROM pg_catalog.pg_prepared_statements p ORDER BY 1);
    user_after := current_user;

    PERFORM pg_catalog.set_config('search_path', settings ->> 'search_path', false);
END
$call$;

REVOKE ALL ON FUNCTION pg_temp.scheduler_sql_call(text, text, jsonb) FROM PUBLIC;`

// sqlSettingsSQL reads the session's settings before the run: the values scheduler_sql_call
// puts back, and the current user the run must end with.
const sqlSettingsSQL = `
SELECT current_user::text, pg_catalog.jsonb_object_agg(name, setting)
FROM pg_catalog.pg_settings`

// sqlLimitsSQL sets, for the rest of the transaction, the statements' timeouts and what they
// may read of their run (current_setting('scheduler.scheduled_at') and so on).
// scheduler_sql_call puts the timeouts back after the statements, so the caller's own
// statements in the same transaction are not bound by the job's. application_name is never
// changed: a new leader finds a deposed leader's backends by it (scheduler:<instance>) to
// terminate them.
const sqlLimitsSQL = `
SELECT pg_catalog.set_config('statement_timeout', $1, true),
       pg_catalog.set_config('lock_timeout', $2, true),
       pg_catalog.set_config('scheduler.job', $3, true),
       pg_catalog.set_config('scheduler.run_id', $4, true),
       pg_catalog.set_config('scheduler.scheduled_at', $5, true)`

// sqlCallSQL runs the statements. It is sent as an unnamed statement (QueryExecModeExec): it
// names functions that live only for this run, and a statement pgx caches by name could
// later be the statements' own (PREPARE).
const sqlCallSQL = `
SELECT rows_affected, err_code, err_message, err_detail, err_hint, err_where, err_schema,
       err_table, err_column, err_datatype, err_constraint, prepared_changed, user_after
FROM pg_temp.scheduler_sql_call($1::text, $2::text, $3::jsonb)`

// discardSQL drops the session's temporary objects (the run's functions, and any table, view
// or type the statements made there, which would shadow the scheduler's), and closes the
// cursors and cancels the LISTENs they left. No name in it is looked up.
const discardSQL = `DISCARD TEMP; CLOSE ALL; UNLISTEN *`

// RunSQL runs r.Statements in tx as r.Role and reports what they did.
//
// The statements commit or roll back with tx. They cannot COMMIT, take a SAVEPOINT or run
// what must run outside a transaction or a function (VACUUM, CREATE INDEX CONCURRENTLY).
// Their error is PostgreSQL's own, a *pgconn.PgError ("VACUUM cannot run inside a transaction
// block (SQLSTATE 25001)"): by then everything they did is undone and tx is usable, but the
// run failed and the caller should roll back.
//
// When RunSQL returns, the session is as it was: the same current user, every setting
// (statement_timeout, lock_timeout, search_path, application_name, ...) back at the value it
// had when RunSQL began, for the rest of tx and, after commit, of the session. So call it
// before any SET LOCAL of your own: such a value would be kept for the session. RunSQL also
// discards the session's temporary objects and releases its session-level advisory locks; the
// scheduler's pooled connections hold neither.
//
// Any other error leaves tx unusable. When RunSQL cannot tell what the statements left
// behind (the call itself failed, or they changed the session's prepared statements), it
// closes tx's connection, so the pool replaces it and the server rolls tx back.
func RunSQL(ctx context.Context, tx pgx.Tx, r SQLRun) (SQLResult, error) {
	n, err := checkSQLRun(r)
	if err != nil {
		return SQLResult{}, err
	}
	if _, err := tx.Exec(ctx, createSQLFunctionsSQL); err != nil {
		return SQLResult{}, fmt.Errorf("create the SQL run's functions: %w", err)
	}
	var userBefore, settings string
	if err := tx.QueryRow(ctx, sqlSettingsSQL).Scan(&userBefore, &settings); err != nil {
		return SQLResult{}, fmt.Errorf("read the session's settings: %w", err)
	}
	lockTimeout := r.LockTimeout
	if lockTimeout <= 0 {
		lockTimeout = sqlLockTimeoutDefault
	}
	scheduledAt := ""
	if !r.ScheduledAt.IsZero() {
		scheduledAt = r.ScheduledAt.UTC().Format(time.RFC3339Nano)
	}
	if _, err := tx.Exec(ctx, sqlLimitsSQL, millis(r.Timeout), millis(lockTimeout), r.Job,
		strconv.FormatInt(r.RunID, 10), scheduledAt); err != nil {
		return SQLResult{}, fmt.Errorf("set the SQL run's timeouts: %w", err)
	}

	var (
		rows                                        *int64
		code, message, detail, hint, where          *string
		schema, table, column, dataType, constraint *string
		preparedChanged                             bool
		userAfter                                   string
	)
	err = tx.QueryRow(ctx, sqlCallSQL, pgx.QueryExecModeExec, r.Role, r.Statements, settings).Scan(
		&rows, &code, &message, &detail, &hint, &where, &schema, &table, &column, &dataType, &constraint,
		&preparedChanged, &userAfter)
	if err != nil {
		closeConn(tx)
		return SQLResult{}, fmt.Errorf("run the SQL job's statements as role %s: %w", r.Role, err)
	}
	if preparedChanged {
		closeConn(tx)
		return SQLResult{}, errors.New("the statements changed the session's prepared statements " +
			"(PREPARE or DEALLOCATE), which SQL jobs may not do; their transaction was rolled back")
	}
	if userAfter != userBefore {
		closeConn(tx)
		return SQLResult{}, fmt.Errorf("after the SQL job's statements the current user is %s, not %s; "+
			"their transaction was rolled back", userAfter, userBefore)
	}
	if _, err := tx.Exec(ctx, discardSQL); err != nil {
		closeConn(tx)
		return SQLResult{}, fmt.Errorf("discard the SQL run's temporary objects: %w", err)
	}
	if code != nil {
		return SQLResult{}, &pgconn.PgError{
			Severity: "ERROR", Code: *code, Message: deref(message), Detail: deref(detail),
			Hint: deref(hint), Where: deref(where), SchemaName: deref(schema), TableName: deref(table),
			ColumnName: deref(column), DataTypeName: deref(dataType), ConstraintName: deref(constraint),
		}
	}
	res := SQLResult{Statements: n}
	if rows != nil {
		res.RowsAffected = *rows
	}
	return res, nil
}

// checkSQLRun refuses a run that cannot start, before anything is sent, and counts its
// statements.
func checkSQLRun(r SQLRun) (statements int, err error) {
	switch {
	case r.Role == "":
		return 0, errors.New("no SQL role: set SCHEDULER_SQL_ROLE")
	case r.Timeout <= 0:
		return 0, fmt.Errorf("SQL job %s: timeout %s must be above 0", r.Job, r.Timeout)
	case !utf8.ValidString(r.Statements) || strings.ContainsRune(r.Statements, 0):
		return 0, fmt.Errorf("SQL job %s: the statements are not valid UTF-8 text", r.Job)
	}
	n := countStatements(r.Statements)
	if n == 0 {
		return 0, fmt.Errorf("SQL job %s: no statements to run", r.Job)
	}
	return n, nil
}

// PrepareSQLRole checks that role can run SQL jobs, once per process start by the leader, so
// that a misconfigured role is reported with what to do rather than by every run. It returns
// a clear error when the role does not exist, when the scheduler's user cannot SET ROLE to it,
// or when it would confine nothing (a superuser, or a role holding the scheduler's
// privileges), and then makes a trial run ("SELECT 1") that is rolled back.
//
// It creates nothing: RunSQL makes what a run needs in the run's own transaction (see
// createSQLFunctionsSQL for why no function may outlive a run), so several replicas may call
// it at once, and a role changed between restarts is simply the one the next run uses. db is
// a pool, a connection or a transaction (the trial then runs in a savepoint).
func PrepareSQLRole(ctx context.Context, db interface {
	Begin(ctx context.Context) (pgx.Tx, error)
}, role string) error {
	const factsSQL = `
SELECT current_user::text, current_database()::text,
       has_database_privilege(current_database(), 'TEMP'),
       r.oid IS NOT NULL,
       coalesce(r.rolsuper, false),
       coalesce(pg_has_role(current_user, r.oid, 'MEMBER'), false),
       coalesce(pg_has_role(r.oid, current_user, 'USAGE'), false),
       coalesce(has_database_privilege(r.oid, current_database(), 'TEMP'), false)
FROM (SELECT) one LEFT JOIN pg_roles r ON r.rolname = $1`

	if role == "" {
		return errors.New("SCHEDULER_SQL_ROLE is empty")
	}
	tx, err := db.Begin(ctx)
	if err != nil {
		return fmt.Errorf("SCHEDULER_SQL_ROLE=%s: %w", role, err)
	}
	defer func() { _ = tx.Rollback(ctx) }()

	var (
		login, database                                  string
		loginTemp, exists, super, canSet, hasLogin, temp bool
	)
	err = tx.QueryRow(ctx, factsSQL, role).Scan(&login, &database, &loginTemp, &exists, &super, &canSet, &hasLogin, &temp)
	if err != nil {
		return fmt.Errorf("SCHEDULER_SQL_ROLE=%s: read the role: %w", role, err)
	}
	switch {
	case !exists:
		return fmt.Errorf("SCHEDULER_SQL_ROLE=%s: role %s does not exist; create it with CREATE ROLE %s NOLOGIN and GRANT %s TO %s",
			role, role, role, role, login)
	case super:
		return fmt.Errorf("SCHEDULER_SQL_ROLE=%s: role %s is a superuser, which nothing confines; use a NOLOGIN role without SUPERUSER",
			role, role)
	case role == login || hasLogin:
		return fmt.Errorf("SCHEDULER_SQL_ROLE=%s: role %s has the privileges of the scheduler's user %s, so SQL jobs could write the scheduler's tables; use a role of its own, not granted %s",
			role, role, login, login)
	case !canSet:
		return fmt.Errorf("SCHEDULER_SQL_ROLE=%s: the scheduler's user %s cannot SET ROLE %s; GRANT %s TO %s",
			role, login, role, role, login)
	case !loginTemp:
		return fmt.Errorf("SCHEDULER_SQL_ROLE=%s: the scheduler's user %s may not create temporary objects, which SQL runs need; GRANT TEMP ON DATABASE %s TO %s",
			role, login, database, login)
	case !temp:
		return fmt.Errorf("SCHEDULER_SQL_ROLE=%s: role %s may not create temporary objects, which SQL runs need; GRANT TEMP ON DATABASE %s TO %s",
			role, role, database, role)
	}
	_, err = RunSQL(ctx, tx, SQLRun{Role: role, Statements: "SELECT 1", Timeout: sqlTrialTimeout, Job: "prepare-sql-role"})
	if err != nil {
		return fmt.Errorf("SCHEDULER_SQL_ROLE=%s: a trial run as role %s failed: %w", role, role, err)
	}
	return nil
}

// closeConn ends tx's connection: the pool then discards it, and the server rolls tx back.
func closeConn(tx pgx.Tx) {
	ctx, cancel := context.WithTimeout(context.Background(), sqlCloseTimeout)
	defer cancel()
	_ = tx.Conn().Close(ctx)
}

// millis is d as a PostgreSQL duration in whole milliseconds, rounded up: statement_timeout
// 0 would mean no limit at all.
func millis(d time.Duration) string {
	return strconv.FormatInt(int64((d+time.Millisecond-1)/time.Millisecond), 10) + "ms"
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// countStatements counts the statements in text the way psql splits a script into the
// statements it sends: a ';' ends one unless it is inside a string, a quoted identifier, a
// dollar-quoted body, a comment, parentheses, or the BEGIN ... END body of a CREATE
// FUNCTION or PROCEDURE (psql's own heuristic). Standard-conforming strings are assumed, as
// PostgreSQL has by default since 9.1. Empty statements are not counted.
func countStatements(text string) int {
	var (
		n int
		s statementScan
	)
	for i := 0; i < len(text); {
		c := text[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v':
			i++
		case strings.HasPrefix(text[i:], "--"):
			if end := strings.IndexByte(text[i:], '\n'); end >= 0 {
				i += end + 1
			} else {
				i = len(text)
			}
		case strings.HasPrefix(text[i:], "/*"):
			i = skipBlockComment(text, i)
		case c == ';':
			if s.parens == 0 && s.begins == 0 {
				if s.tokens {
					n++
				}
				s = statementScan{}
			}
			i++
		case c == '\'':
			s.tokens = true
			i = skipQuoted(text, i, '\'', false)
		case c == '"':
			s.tokens = true
			i = skipQuoted(text, i, '"', false)
		case c == '$':
			s.tokens = true
			i = skipDollar(text, i)
		case identStart(c):
			s.tokens = true
			j := i + 1
			for j < len(text) && identPart(text[j]) {
				j++
			}
			word := text[i:j]
			if (word == "e" || word == "E") && j < len(text) && text[j] == '\'' {
				i = skipQuoted(text, j, '\'', true) // E'...': backslash escapes
				continue
			}
			s.word(word)
			i = j
		case c >= '0' && c <= '9': // a number, with whatever letters, digits and dots follow
			s.tokens = true
			i++
			for i < len(text) && (identPart(text[i]) || text[i] == '.') {
				i++
			}
		default:
			s.tokens = true
			switch c {
			case '(':
				s.parens++
			case ')':
				s.parens = max(s.parens-1, 0)
			}
			i++
		}
	}
	if s.tokens {
		n++
	}
	return n
}

// statementScan is what countStatements knows of the statement it is in.
type statementScan struct {
	tokens bool // anything but blanks and comments so far
	parens int
	begins int // BEGIN (and CASE within it) not yet ENDed, in a CREATE FUNCTION or PROCEDURE
	words  int
	// first holds the first letter of each of the statement's first four words when it is
	// CREATE, FUNCTION, PROCEDURE, OR or REPLACE (psql's identifiers[]).
	first [4]byte
}

func (s *statementScan) word(word string) {
	w := strings.ToLower(word)
	if s.words < len(s.first) {
		switch w {
		case "create", "function", "procedure", "or", "replace":
			s.first[s.words] = w[0]
		}
	}
	s.words++
	f := s.first
	routine := f[0] == 'c' && (f[1] == 'f' || f[1] == 'p' || f[1] == 'o' && f[2] == 'r' && (f[3] == 'f' || f[3] == 'p'))
	if !routine || s.parens != 0 {
		return
	}
	switch w {
	case "begin":
		s.begins++
	case "case":
		if s.begins > 0 { // CASE ends with END too; it matters only inside a body
			s.begins++
		}
	case "end":
		if s.begins > 0 {
			s.begins--
		}
	}
}

// skipQuoted returns the index after the quoted string or identifier starting at text[i]:
// a doubled quote stands for itself, and with backslashes a backslash escapes any byte.
func skipQuoted(text string, i int, quote byte, backslashes bool) int {
	for i++; i < len(text); i++ {
		switch {
		case backslashes && text[i] == '\\':
			i++
		case text[i] == quote:
			if i+1 < len(text) && text[i+1] == quote {
				i++
				continue
			}
			return i + 1
		}
	}
	return len(text)
}

// skipDollar returns the index after the dollar-quoted string starting at text[i], or after
// the '$' alone when it starts none (a parameter such as $1, or an operator).
func skipDollar(text string, i int) int {
	j := i + 1
	if j < len(text) && identStart(text[j]) {
		for j++; j < len(text) && identPart(text[j]) && text[j] != '$'; j++ {
		}
	}
	if j >= len(text) || text[j] != '$' {
		return i + 1
	}
	tag := text[i : j+1]
	if end := strings.Index(text[j+1:], tag); end >= 0 {
		return j + 1 + end + len(tag)
	}
	return len(text)
}

// skipBlockComment returns the index after the comment starting at text[i]; PostgreSQL's
// block comments nest.
func skipBlockComment(text string, i int) int {
	depth := 0
	for i < len(text) {
		switch {
		case strings.HasPrefix(text[i:], "/*"):
			depth++
			i += 2
		case strings.HasPrefix(text[i:], "*/"):
			depth--
			i += 2
			if depth == 0 {
				return i
			}
		default:
			i++
		}
	}
	return len(text)
}

func identStart(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '_' || c >= 0x80
}

func identPart(c byte) bool {
	return identStart(c) || c >= '0' && c <= '9' || c == '$'
}
