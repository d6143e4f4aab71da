package targets

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schedulerhq/scheduler/internal/testdb"
)

// sqlFixture is a migrated test database (the test connects as the superuser postgres, the
// scheduler's login here) and a SQL role of the test's own, which may read and write
// sql_target and nothing else. Roles are cluster-wide, so each test draws its role's name.
type sqlFixture struct {
	url  string
	pool *pgxpool.Pool
	role string
}

func newSQLFixture(t *testing.T) *sqlFixture {
	t.Helper()
	u := testdb.New(t)
	f := &sqlFixture{url: u, pool: testdb.Pool(t, u), role: sqlTestRole(t)}
	ctx := sqlTestCtx(t)
	f.exec(t, fmt.Sprintf(`CREATE ROLE %s NOLOGIN`, f.role))
	t.Cleanup(func() { dropSQLTestRole(t, f.pool, f.role) })
	f.exec(t, `CREATE TABLE sql_target (id int PRIMARY KEY, note text NOT NULL DEFAULT '')`)
	f.exec(t, fmt.Sprintf(`GRANT SELECT, INSERT, UPDATE, DELETE ON sql_target TO %s`, f.role))
	// A run of the scheduler's own, which the role must neither read nor rewrite.
	f.exec(t, `INSERT INTO job_runs (job, trigger, status) VALUES ('nightly', 'manual', 'running')`)
	require.NoError(t, PrepareSQLRole(ctx, f.pool, f.role))
	return f
}

func (f *sqlFixture) exec(t *testing.T, sql string, args ...any) {
	t.Helper()
	_, err := f.pool.Exec(sqlTestCtx(t), sql, args...)
	require.NoError(t, err, sql)
}

// run runs statements in a transaction of their own, committed when RunSQL succeeds.
func (f *sqlFixture) run(t *testing.T, statements string) (SQLResult, error) {
	t.Helper()
	ctx := sqlTestCtx(t)
	tx, err := f.pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }() // at once: a test makes many runs on a small pool
	res, err := RunSQL(ctx, tx, f.sqlRun(statements))
	if err != nil {
		return res, err
	}
	return res, tx.Commit(ctx)
}

func (f *sqlFixture) sqlRun(statements string) SQLRun {
	return SQLRun{Role: f.role, Statements: statements, Timeout: 30 * time.Second, Job: "nightly-sql", RunID: 7}
}

// notes reads sql_target as id → note.
func (f *sqlFixture) notes(t *testing.T) map[int]string {
	t.Helper()
	rows, err := f.pool.Query(sqlTestCtx(t), `SELECT id, note FROM sql_target`)
	require.NoError(t, err)
	got := map[int]string{}
	var id int
	var note string
	_, err = pgx.ForEachRow(rows, []any{&id, &note}, func() error { got[id] = note; return nil })
	require.NoError(t, err)
	return got
}

// session reads what RunSQL must leave as it found it.
func session(t *testing.T, q interface {
	QueryRow(context.Context, string, ...any) pgx.Row
}) map[string]string {
	t.Helper()
	var user, statementTimeout, lockTimeout, searchPath, appName, idle, syncCommit string
	err := q.QueryRow(sqlTestCtx(t), `
		SELECT current_user, current_setting('statement_timeout'), current_setting('lock_timeout'),
		       current_setting('search_path'), current_setting('application_name'),
		       current_setting('idle_in_transaction_session_timeout'), current_setting('synchronous_commit')`,
	).Scan(&user, &statementTimeout, &lockTimeout, &searchPath, &appName, &idle, &syncCommit)
	require.NoError(t, err)
	return map[string]string{
		"current_user": user, "statement_timeout": statementTimeout, "lock_timeout": lockTimeout,
		"search_path": searchPath, "application_name": appName,
		"idle_in_transaction_session_timeout": idle, "synchronous_commit": syncCommit,
	}
}

// sqlBegin begins a transaction on db that is rolled back, if still open, when the test ends,
// even when it fails half-way: before the test's role is dropped, which would wait for it.
func sqlBegin(t *testing.T, db interface {
	Begin(context.Context) (pgx.Tx, error)
}) pgx.Tx {
	t.Helper()
	tx, err := db.Begin(sqlTestCtx(t))
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = tx.Rollback(ctx)
	})
	return tx
}

func sqlTestCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func sqlTestRole(t *testing.T) string {
	b := make([]byte, 6)
	_, err := rand.Read(b)
	require.NoError(t, err)
	return "sql_jobs_" + hex.EncodeToString(b)
}

// dropSQLTestRole drops a test's role before its database goes: the role's grants there would
// keep DROP ROLE from succeeding.
func dropSQLTestRole(t *testing.T, pool *pgxpool.Pool, role string) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := pool.Exec(ctx, fmt.Sprintf(`DROP OWNED BY %[1]s CASCADE; DROP ROLE %[1]s`, role)); err != nil {
		t.Errorf("drop role %s: %v", role, err)
	}
}

// requirePgError asserts that err is PostgreSQL's error code, and returns it.
func requirePgError(t *testing.T, err error, code string) *pgconn.PgError {
	t.Helper()
	var pgErr *pgconn.PgError
	require.True(t, errors.As(err, &pgErr), "want SQLSTATE %s, got %v", code, err)
	require.Equal(t, code, pgErr.Code, pgErr.Error())
	return pgErr
}

func TestSQLCommitsAndRollsBackWithTheCallersTransaction(t *testing.T) {
	t.Parallel()
	f := newSQLFixture(t)
	ctx := sqlTestCtx(t)

	for _, commit := range []bool{true, false} {
		tx := sqlBegin(t, f.pool)
		note := map[bool]string{true: "committed", false: "rolled back"}[commit]
		_, err := RunSQL(ctx, tx, f.sqlRun(fmt.Sprintf(`INSERT INTO sql_target VALUES (%d, '%s')`, len(note), note)))
		require.NoError(t, err)
		if commit {
			require.NoError(t, tx.Commit(ctx))
		} else {
			require.NoError(t, tx.Rollback(ctx))
		}
	}
	assert.Equal(t, map[int]string{9: "committed"}, f.notes(t))
}

func TestSQLRunsEveryStatementInOrder(t *testing.T) {
	t.Parallel()
	f := newSQLFixture(t)

	// Each statement builds on the one before (a table the one before created, even); ';'
	// appears in a string literal, in a quoted identifier, in comments and in dollar-quoted
	// bodies, where it ends nothing.
	res, err := f.run(t, `
		INSERT INTO sql_target VALUES (1, 'a;b');  -- not the end; of anything
		UPDATE sql_target AS "x;y" SET note = "x;y".note || ';c' WHERE id = 1;
		DO $$ BEGIN INSERT INTO sql_target SELECT 2, note || '$;' FROM sql_target WHERE id = 1; END $$;
		DO $body$ BEGIN EXECUTE $q$INSERT INTO sql_target SELECT id + 10, note FROM sql_target$q$; END $body$;
		CREATE TEMP TABLE staging AS SELECT id + 20 AS id, note FROM sql_target WHERE id < 10;
		INSERT INTO sql_target SELECT * FROM staging;
		/* a last; /* nested; */ comment */ DELETE FROM sql_target WHERE id IN (11, 12, 13)`)
	require.NoError(t, err)
	assert.Equal(t, SQLResult{Statements: 7, RowsAffected: 2}, res)
	assert.Equal(t, map[int]string{1: "a;b;c", 2: "a;b;c$;", 21: "a;b;c", 22: "a;b;c$;"}, f.notes(t))
}

// Each run's functions are its session's own: a run does not wait for another to commit.
func TestSQLRunsDoNotWaitForEachOther(t *testing.T) {
	t.Parallel()
	f := newSQLFixture(t)
	ctx := sqlTestCtx(t)

	first := sqlBegin(t, f.pool)
	_, err := RunSQL(ctx, first, f.sqlRun(`INSERT INTO sql_target VALUES (1)`))
	require.NoError(t, err)
	waitCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	second := sqlBegin(t, f.pool)
	_, err = RunSQL(waitCtx, second, f.sqlRun(`INSERT INTO sql_target VALUES (2)`))
	require.NoError(t, err, "the second run waited for the first, still open")
	require.NoError(t, second.Commit(ctx))
	require.NoError(t, first.Commit(ctx))
	assert.Equal(t, map[int]string{1: "", 2: ""}, f.notes(t))
}

func TestSQLRowsAffectedAreTheLastStatements(t *testing.T) {
	t.Parallel()
	f := newSQLFixture(t)

	res, err := f.run(t, `INSERT INTO sql_target SELECT g, '' FROM generate_series(1, 5) g`)
	require.NoError(t, err)
	assert.Equal(t, SQLResult{Statements: 1, RowsAffected: 5}, res)

	res, err = f.run(t, `DELETE FROM sql_target WHERE id <= 2; UPDATE sql_target SET note = 'kept';`)
	require.NoError(t, err)
	assert.Equal(t, SQLResult{Statements: 2, RowsAffected: 3}, res)

	res, err = f.run(t, `UPDATE sql_target SET note = 'again'; CREATE TEMP TABLE scratch (id int)`)
	require.NoError(t, err)
	assert.Equal(t, SQLResult{Statements: 2, RowsAffected: 0}, res, "a statement that reports no rows, last")
}

func TestSQLStatementsSeeTheirRun(t *testing.T) {
	t.Parallel()
	f := newSQLFixture(t)
	const record = `INSERT INTO sql_target SELECT %d, concat_ws('|', current_setting('scheduler.job'),
		current_setting('scheduler.run_id'), current_setting('scheduler.scheduled_at'), current_user)`
	ctx := sqlTestCtx(t)

	for id, at := range map[int]time.Time{1: time.Date(2024, 3, 1, 3, 0, 0, 0, time.FixedZone("CET", 3600)), 2: {}} {
		r := f.sqlRun(fmt.Sprintf(record, id))
		r.RunID, r.ScheduledAt = int64(40+id), at
		err := pgx.BeginFunc(ctx, f.pool, func(tx pgx.Tx) error {
			_, err := RunSQL(ctx, tx, r)
			return err
		})
		require.NoError(t, err)
	}
	assert.Equal(t, map[int]string{
		1: "nightly-sql|41|2024-03-01T02:00:00Z|" + f.role,
		2: "nightly-sql|42||" + f.role, // a manual run has no slot
	}, f.notes(t))
}

// The statements cannot take back the scheduler's login, nor use its privileges.
func TestSQLRoleCannotLeaveItsRole(t *testing.T) {
	t.Parallel()
	f := newSQLFixture(t)

	for _, tc := range []struct {
		statements, message string
	}{
		{`RESET ROLE; UPDATE job_runs SET error = 'rewritten'`, `cannot set parameter "role" within security-definer function`},
		{`SET ROLE postgres; UPDATE job_runs SET error = 'rewritten'`, `cannot set parameter "role" within security-definer function`},
		{`SET LOCAL ROLE NONE`, `cannot set parameter "role" within security-definer function`},
		{`SELECT set_config('role', 'postgres', false); UPDATE job_runs SET error = 'rewritten'`, `cannot set parameter "role" within security-definer function`},
		{`SET SESSION AUTHORIZATION postgres; UPDATE job_runs SET error = 'rewritten'`, `cannot set parameter "session_authorization" within security-definer function`},
		{`SELECT count(*) FROM job_runs`, `permission denied for table job_runs`},
		{`UPDATE job_runs SET error = 'rewritten'`, `permission denied for table job_runs`},
		{`INSERT INTO job_runs (job, trigger, status) VALUES ('forged', 'manual', 'succeeded')`, `permission denied for table job_runs`},
		{`DELETE FROM job_runs`, `permission denied for table job_runs`},
		{`UPDATE scheduler_leader SET epoch = epoch + 1`, `permission denied for table scheduler_leader`},
		// The role owns the function it runs in, and may change it: the call under way is
		// already running as the role.
		{`ALTER FUNCTION pg_temp.scheduler_sql_run(text) SECURITY INVOKER; SELECT count(*) FROM job_runs`, `permission denied for table job_runs`},
		// It does not own the scheduler's side of the call.
		{`ALTER FUNCTION pg_temp.scheduler_sql_call(text, text, jsonb) SECURITY DEFINER`, `must be owner of function pg_temp.scheduler_sql_call`},
	} {
		_, err := f.run(t, tc.statements)
		pgErr := requirePgError(t, err, "42501")
		assert.Equal(t, tc.message, pgErr.Message, tc.statements)
	}

	var runError *string
	require.NoError(t, f.pool.QueryRow(sqlTestCtx(t), `SELECT error FROM job_runs WHERE job = 'nightly'`).Scan(&runError))
	assert.Nil(t, runError, "the scheduler's run is untouched")
	var n int
	require.NoError(t, f.pool.QueryRow(sqlTestCtx(t), `SELECT count(*) FROM job_runs`).Scan(&n))
	assert.Equal(t, 1, n)
}

// A function the role owns could be made SECURITY INVOKER and so run as its caller: each run
// has a function of its own, so a change committed by one run reaches no other.
func TestSQLRoleCannotRedefineTheNextRunsFunction(t *testing.T) {
	t.Parallel()
	f := newSQLFixture(t)
	ctx := sqlTestCtx(t)
	conn, err := f.pool.Acquire(ctx) // the same session throughout
	require.NoError(t, err)
	defer conn.Release()

	runOn := func(statements string) error {
		return pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
			_, err := RunSQL(ctx, tx, f.sqlRun(statements))
			return err
		})
	}
	require.NoError(t, runOn(`
		ALTER FUNCTION pg_temp.scheduler_sql_run(text) SECURITY INVOKER;
		CREATE OR REPLACE FUNCTION pg_temp.scheduler_sql_run(statements text) RETURNS bigint
			LANGUAGE sql AS 'UPDATE job_runs SET error = ''rewritten'' RETURNING 1'`))
	err = runOn(`SELECT count(*) FROM job_runs`)
	requirePgError(t, err, "42501")
}

// A role that may create objects somewhere can put its own operators ahead of pg_catalog's
// with SET search_path: the scheduler's clean-up after the statements must not call them
// (it would, with the scheduler's privileges).
func TestSQLRoleCannotSubvertTheCleanUp(t *testing.T) {
	t.Parallel()
	f := newSQLFixture(t)
	f.exec(t, fmt.Sprintf(`CREATE SCHEMA sql_jobs_own; GRANT USAGE, CREATE ON SCHEMA sql_jobs_own TO %s`, f.role))

	res, err := f.run(t, `
		CREATE FUNCTION sql_jobs_own.eq(a text, b text) RETURNS boolean LANGUAGE sql AS $f$
			UPDATE job_runs SET error = 'rewritten by ' || current_user;
			SELECT a OPERATOR(pg_catalog.=) b
		$f$;
		CREATE FUNCTION sql_jobs_own.eq(a text, b name) RETURNS boolean LANGUAGE sql AS $f$
			SELECT sql_jobs_own.eq(a, b::text)
		$f$;
		CREATE OPERATOR sql_jobs_own.= (LEFTARG = text, RIGHTARG = text, FUNCTION = sql_jobs_own.eq);
		CREATE OPERATOR sql_jobs_own.= (LEFTARG = text, RIGHTARG = name, FUNCTION = sql_jobs_own.eq);
		SET search_path = sql_jobs_own, pg_catalog, public`)
	require.NoError(t, err)
	assert.Equal(t, 5, res.Statements)

	var runError *string
	require.NoError(t, f.pool.QueryRow(sqlTestCtx(t), `SELECT error FROM job_runs`).Scan(&runError))
	assert.Nil(t, runError)
}

// What a plain SET, a temporary table or a session-level lock would leave in the scheduler's
// session is undone before RunSQL returns, and stays undone after commit.
func TestSQLSessionIsLeftAsItWas(t *testing.T) {
	t.Parallel()
	f := newSQLFixture(t)
	ctx := sqlTestCtx(t)
	conn, err := f.pool.Acquire(ctx)
	require.NoError(t, err)
	defer conn.Release()
	_, err = conn.Exec(ctx, `SET statement_timeout = '7s'; SET application_name = 'scheduler:test'`)
	require.NoError(t, err)
	before := session(t, conn)
	require.Equal(t, "7s", before["statement_timeout"])

	tx := sqlBegin(t, conn)
	r := f.sqlRun(`
		SET application_name = 'hidden';
		SET search_path = pg_temp, pg_catalog, public;
		SET idle_in_transaction_session_timeout = 0;
		SET synchronous_commit = off;
		SET statement_timeout = 0;
		SET LOCAL lock_timeout = '1h';
		CREATE TEMP TABLE job_runs (id bigint);
		CREATE TEMP VIEW scheduler_leader AS SELECT 1::bigint AS id, 999::bigint AS epoch;
		SELECT pg_advisory_lock(4242);
		DECLARE held CURSOR WITH HOLD FOR SELECT 1;
		LISTEN sql_job_channel`)
	r.Timeout, r.LockTimeout = 200*time.Millisecond, 0
	_, err = RunSQL(ctx, tx, r)
	require.NoError(t, err)

	assert.Equal(t, before, session(t, tx), "within the transaction")
	var runs int
	var epoch int64
	require.NoError(t, tx.QueryRow(ctx, `SELECT (SELECT count(*) FROM job_runs), (SELECT epoch FROM scheduler_leader)`).Scan(&runs, &epoch))
	assert.Equal(t, 1, runs, "job_runs is the scheduler's, not a temporary table")
	assert.NotEqual(t, int64(999), epoch, "scheduler_leader is the scheduler's")
	require.NoError(t, tx.Commit(ctx))

	assert.Equal(t, before, session(t, conn), "after commit")
	var temps, cursors, listens int
	require.NoError(t, conn.QueryRow(ctx, `
		SELECT (SELECT count(*) FROM pg_class WHERE relnamespace = pg_my_temp_schema()),
		       (SELECT count(*) FROM pg_cursors WHERE name <> ''),
		       (SELECT count(*) FROM pg_listening_channels())`).Scan(&temps, &cursors, &listens))
	assert.Equal(t, []int{0, 0, 0}, []int{temps, cursors, listens}, "temporary objects, cursors, LISTENs")
	var free bool
	require.NoError(t, f.pool.QueryRow(ctx, `SELECT pg_try_advisory_lock(4242)`).Scan(&free))
	assert.True(t, free, "the session-level advisory lock was released")
}

// A PREPAREd statement outlives any rollback, and one named like pgx's cached statements would
// be run by the scheduler as itself: RunSQL gives up the connection.
func TestSQLPreparedStatementsCloseTheConnection(t *testing.T) {
	t.Parallel()
	f := newSQLFixture(t)
	ctx := sqlTestCtx(t)

	for _, statements := range []string{
		`PREPARE stmtcache_forged AS UPDATE job_runs SET error = 'rewritten'`,
		`PREPARE forged AS SELECT 1; SELECT 1/0`, // and then fails
		`DEALLOCATE ALL`,
	} {
		t.Run(statements, func(t *testing.T) {
			conn, err := f.pool.Acquire(ctx)
			require.NoError(t, err)
			defer conn.Release()
			// A cached statement of the connection's, as pgx leaves them.
			_, err = conn.Exec(ctx, `SELECT count(*) FROM sql_target WHERE id = $1`, 1)
			require.NoError(t, err)
			_, err = RunSQL(ctx, sqlBegin(t, conn), f.sqlRun(statements))
			require.ErrorContains(t, err, "changed the session's prepared statements")
			assert.True(t, conn.Conn().IsClosed())
		})
	}
	var runError *string
	require.NoError(t, f.pool.QueryRow(ctx, `SELECT error FROM job_runs`).Scan(&runError))
	assert.Nil(t, runError)
}

func TestSQLStatementTimeoutStopsTheStatements(t *testing.T) {
	t.Parallel()
	f := newSQLFixture(t)
	ctx := sqlTestCtx(t)

	for _, statements := range []string{
		`SELECT pg_sleep(10)`,
		`SET statement_timeout = 0; SET LOCAL statement_timeout = 0; SELECT pg_sleep(10)`,
	} {
		t.Run(statements, func(t *testing.T) {
			tx := sqlBegin(t, f.pool)
			r := f.sqlRun(statements)
			r.Timeout = 200 * time.Millisecond
			start := time.Now()
			_, err := RunSQL(ctx, tx, r)
			pgErr := requirePgError(t, err, "57014")
			assert.Equal(t, "canceling statement due to statement timeout", pgErr.Message)
			assert.Less(t, time.Since(start), 5*time.Second)

			// The caller's own statements are not bound by the job's timeout.
			_, err = tx.Exec(ctx, `SELECT pg_sleep(0.4)`)
			require.NoError(t, err)
		})
	}
}

// What must run outside a transaction or a function fails at once, with PostgreSQL's message.
func TestSQLRefusesWhatCannotRunInATransaction(t *testing.T) {
	t.Parallel()
	f := newSQLFixture(t)

	for statements, message := range map[string]string{
		`VACUUM sql_target`: "VACUUM cannot run inside a transaction block",
		`CREATE INDEX CONCURRENTLY sql_target_note_idx ON sql_target (note)`: "CREATE INDEX CONCURRENTLY cannot run inside a transaction block",
	} {
		start := time.Now()
		_, err := f.run(t, statements)
		pgErr := requirePgError(t, err, "25001")
		assert.Equal(t, message, pgErr.Message)
		assert.Equal(t, "ERROR: "+message+" (SQLSTATE 25001)", err.Error())
		assert.Less(t, time.Since(start), 5*time.Second)
	}
	_, err := f.run(t, `INSERT INTO sql_target VALUES (1); COMMIT`)
	pgErr := requirePgError(t, err, "0A000")
	assert.Equal(t, "EXECUTE of transaction commands is not implemented", pgErr.Message)
	assert.Empty(t, f.notes(t))
}

// A failed statement undoes the statements before it; the transaction stays usable.
func TestSQLStatementErrorUndoesTheStatements(t *testing.T) {
	t.Parallel()
	f := newSQLFixture(t)
	ctx := sqlTestCtx(t)

	tx := sqlBegin(t, f.pool)
	_, err := RunSQL(ctx, tx, f.sqlRun(`INSERT INTO sql_target VALUES (1, 'x'); SELECT 1/0`))
	pgErr := requirePgError(t, err, "22012")
	assert.Equal(t, "division by zero", pgErr.Message)
	var n int
	require.NoError(t, tx.QueryRow(ctx, `SELECT count(*) FROM sql_target`).Scan(&n))
	assert.Equal(t, 0, n)
	require.NoError(t, tx.Commit(ctx))
	assert.Empty(t, f.notes(t))
}

func TestSQLRunRefusedBeforeItStarts(t *testing.T) {
	t.Parallel()
	ctx := sqlTestCtx(t)
	for _, r := range []SQLRun{
		{Role: "", Statements: "SELECT 1", Timeout: time.Second},
		{Role: "r", Statements: "SELECT 1"},
		{Role: "r", Statements: " ;; -- nothing\n", Timeout: time.Second},
		{Role: "r", Statements: "SELECT '\x00'", Timeout: time.Second},
	} {
		_, err := RunSQL(ctx, nil, r) // nothing is sent
		assert.Error(t, err, r)
	}
}

func TestPrepareSQLRoleTwiceAndConcurrently(t *testing.T) {
	t.Parallel()
	f := newSQLFixture(t) // prepared once already
	ctx := sqlTestCtx(t)
	require.NoError(t, PrepareSQLRole(ctx, f.pool, f.role))

	conns := make([]*pgx.Conn, 2)
	for i := range conns {
		c, err := pgx.Connect(ctx, f.url)
		require.NoError(t, err)
		t.Cleanup(func() { _ = c.Close(context.Background()) })
		conns[i] = c
	}
	start := make(chan struct{})
	errs := make(chan error, len(conns))
	for _, c := range conns {
		go func() {
			<-start
			errs <- PrepareSQLRole(ctx, c, f.role)
		}()
	}
	close(start)
	for range conns {
		select {
		case err := <-errs:
			assert.NoError(t, err)
		case <-ctx.Done():
			t.Fatal("PrepareSQLRole did not return")
		}
	}
	_, err := f.run(t, `INSERT INTO sql_target VALUES (1)`)
	require.NoError(t, err)
}

func TestPrepareSQLRoleExplainsAMissingRole(t *testing.T) {
	t.Parallel()
	pool := testdb.Pool(t, testdb.New(t))
	role := sqlTestRole(t)
	err := PrepareSQLRole(sqlTestCtx(t), pool, role)
	require.Error(t, err)
	assert.Equal(t, fmt.Sprintf("SCHEDULER_SQL_ROLE=%[1]s: role %[1]s does not exist; "+
		"create it with CREATE ROLE %[1]s NOLOGIN and GRANT %[1]s TO postgres", role), err.Error())
}

func TestPrepareSQLRoleRefusesRolesThatConfineNothing(t *testing.T) {
	t.Parallel()
	f := newSQLFixture(t)
	ctx := sqlTestCtx(t)

	err := PrepareSQLRole(ctx, f.pool, "postgres")
	assert.ErrorContains(t, err, "is a superuser")

	f.exec(t, fmt.Sprintf(`GRANT postgres TO %s`, f.role)) // the login's own privileges
	err = PrepareSQLRole(ctx, f.pool, f.role)
	assert.ErrorContains(t, err, "has the privileges of the scheduler's user postgres")
	_, err = f.run(t, `SELECT 1`)
	requirePgError(t, err, "42501") // and RunSQL refuses it too
}

// The scheduler's login need not be a superuser: a member of the role, with TEMP, will do.
func TestSQLWithAnUnprivilegedLogin(t *testing.T) {
	t.Parallel()
	f := newSQLFixture(t)
	ctx := sqlTestCtx(t)
	login, password := sqlTestRole(t), sqlTestRole(t)
	f.exec(t, fmt.Sprintf(`CREATE ROLE %s LOGIN PASSWORD '%s'`, login, password))
	t.Cleanup(func() { dropSQLTestRole(t, f.pool, login) })
	f.exec(t, fmt.Sprintf(`CREATE TABLE login_only (id int); ALTER TABLE login_only OWNER TO %s`, login))

	u, err := url.Parse(f.url)
	require.NoError(t, err)
	u.User = url.UserPassword(login, password)
	pool := testdb.Pool(t, u.String())

	err = PrepareSQLRole(ctx, pool, f.role)
	assert.EqualError(t, err, fmt.Sprintf("SCHEDULER_SQL_ROLE=%[1]s: the scheduler's user %[2]s cannot SET ROLE %[1]s; GRANT %[1]s TO %[2]s", f.role, login))

	f.exec(t, fmt.Sprintf(`GRANT %s TO %s`, f.role, login))
	require.NoError(t, PrepareSQLRole(ctx, pool, f.role))

	run := func(statements string) error {
		return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			_, err := RunSQL(ctx, tx, f.sqlRun(statements))
			return err
		})
	}
	require.NoError(t, run(`INSERT INTO sql_target VALUES (1, current_user)`))
	assert.Equal(t, map[int]string{1: f.role}, f.notes(t))
	for _, statements := range []string{`RESET ROLE; SELECT * FROM login_only`, `SELECT * FROM login_only`} {
		requirePgError(t, run(statements), "42501")
	}
}

func TestSQLStatementCount(t *testing.T) {
	t.Parallel()
	for text, want := range map[string]int{
		"":                                      0,
		" ;\n; ":                                0,
		"-- only a comment\n/* and; another */": 0,
		"SELECT 1":                              1,
		"SELECT 1;":                             1,
		"SELECT 1; SELECT 2":                    2,
		"INSERT INTO t VALUES ('a;b'); SELECT ';'":  2,
		"SELECT 'it''s;'; SELECT 2":                 2,
		`SELECT E'\';'; SELECT 2`:                   2,
		`SELECT 'a\'; SELECT 2`:                     2, // standard strings: the backslash is a character
		`SELECT "a;""b" FROM t; SELECT 2`:           2,
		"DO $$ BEGIN PERFORM 1; END $$; SELECT 1":   2,
		"DO $body$ SELECT '$$;' $body$; SELECT 1":   2,
		"SELECT $1; SELECT a$b$ FROM t":             2,
		"/* a; /* nested; */ still; */ SELECT 1":    1,
		"SELECT 1 -- trailing; comment\n; SELECT 2": 2,
		"SELECT 'unterminated; SELECT 2":            1,
		"SELECT (1; 2); SELECT 3":                   2,
		"CREATE FUNCTION f() RETURNS int LANGUAGE sql BEGIN ATOMIC SELECT 1; SELECT 2; END; SELECT f()":                   2,
		"create or replace procedure p() language sql begin atomic insert into t values (1); end; call p()":               2,
		"CREATE FUNCTION f(a int) RETURNS int LANGUAGE sql BEGIN ATOMIC SELECT CASE WHEN a > 0 THEN 1 END; END; SELECT 1": 2,
		"SELECT CASE WHEN true THEN 1 END; SELECT 2":                                                                      2,
		"BEGIN; SELECT 1; END":      3,
		"SELECT 1.5e3; SELECT 0x1F": 2,
	} {
		assert.Equal(t, want, countStatements(text), text)
	}
}
