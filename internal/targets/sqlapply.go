package targets

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// sessionConfig is the configuration of a session of the target's login: application_name
// app, and the settings the runner relies on as startup parameters. A client's startup
// parameters outrank the role's own settings (ALTER ROLE … SET), so whatever a job or anyone
// left on the role, the session starts with:
//   - standard_conforming_strings on: the statements are refused or run as TransactionControl
//     reads them, with a backslash in ” as a plain byte;
//   - statement_timeout and lock_timeout of the run: a first, polite bound, before the
//     cancel and terminate of stop;
//   - idle_in_transaction_session_timeout (store.ConnConfig's, from the lease): the server
//     drops a vanished replica's transaction and its locks;
//   - read committed, read-write transactions: the marker's ON CONFLICT waits for a
//     concurrent run of the slot and then sees its commit.
//
// search_path is left to the role and the target's URL: the runner names its own tables and
// functions with their schema, and a team may rely on its role's path for its own.
func (t *SQLTarget) sessionConfig(app string, timeout time.Duration) *pgx.ConnConfig {
	conf := t.conf.Conn.Copy()
	conf.RuntimeParams["application_name"] = app
	conf.RuntimeParams["standard_conforming_strings"] = "on"
	conf.RuntimeParams["statement_timeout"] = millis(timeout)
	conf.RuntimeParams["lock_timeout"] = millis(timeout)
	conf.RuntimeParams["default_transaction_read_only"] = "off"
	conf.RuntimeParams["default_transaction_isolation"] = "read committed"
	if conf.RuntimeParams["idle_in_transaction_session_timeout"] == "" {
		conf.RuntimeParams["idle_in_transaction_session_timeout"] = millis(sqlIdleInTransaction)
	}
	return conf
}

// connect opens a session of the target's login (sessionConfig). A refused login says that
// its password may have been changed, by a job among others.
func (t *SQLTarget) connect(ctx context.Context, app string, timeout time.Duration) (*pgx.Conn, error) {
	conn, err := pgx.ConnectConfig(ctx, t.sessionConfig(ApplicationNameJobPrefix+t.conf.InstanceID+":"+app, timeout))
	var pgErr *pgconn.PgError
	switch {
	case err == nil:
		return conn, nil
	case errors.As(err, &pgErr) && (pgErr.Code == "28P01" || pgErr.Code == "28000"):
		return nil, fmt.Errorf("SQL target %s: the server refused login %s (SQLSTATE %s): its password no longer matches SCHEDULER_SQL_TARGET_%s, "+
			"or the server no longer lets it in from here; a job may have changed it (ALTER ROLE … PASSWORD). An administrator sets the login's password "+
			"back to the one in SCHEDULER_SQL_TARGET_%s (or both to a new one), and lets the login in only by client certificate or only from the "+
			"scheduler's hosts (docs/operations.md, \"SQL targets\")", t.conf.Name, t.Login(), pgErr.Code, t.conf.Name, t.conf.Name)
	}
	return nil, fmt.Errorf("connect to SQL target %s: %w", t.conf.Name, err)
}

// sqlStatements are the statements the runner sends on a run's connection for one login's
// markers (markersTable), built once per target. They name their tables and functions with
// their schema, so nothing the job's statements create can stand in for them.
type sqlStatements struct {
	// applied finds the slot's marker.
	applied string
	// mark records the slot in the statements' transaction. ON CONFLICT waits for a
	// concurrent run of the same slot: if it committed, this one inserts nothing and rolls
	// back.
	mark string
	// purge drops this job's markers older than the runs' retention, in the same
	// transaction, so markers need no upkeep of their own.
	purge string
}

func newSQLStatements(markers string) sqlStatements {
	return sqlStatements{
		applied: `SELECT run_id FROM ` + markers + ` WHERE key = $1`,
		mark: `INSERT INTO ` + markers + ` (key, job, scheduled_at, run_id)
VALUES ($1, $2, $3::timestamptz, $4)
ON CONFLICT (key) DO NOTHING
RETURNING true`,
		purge: `DELETE FROM ` + markers + ` WHERE job = $1 AND committed_at < pg_catalog.now() - $2::interval`,
	}
}

// sqlSettingsSQL sets, for the transaction, the statements' timeout and what they may read
// of their run, and returns the transaction's id (sqlAfterSQL compares it).
const sqlSettingsSQL = `
SELECT pg_catalog.set_config('statement_timeout', $1, true),
       pg_catalog.set_config('scheduler.job', $2, true),
       pg_catalog.set_config('scheduler.run_id', $3, true),
       pg_catalog.set_config('scheduler.scheduled_at', $4, true),
       pg_catalog.pg_current_xact_id()::text`

// sqlAfterSQL reads, after the statements, the id of the transaction the marker would
// commit in, and whether the statements changed a role in it. ALTER ROLE (a password, a
// setting), GRANT of a role and their kind write pg_authid, pg_auth_members or
// pg_db_role_setting, and hold a lock stronger than a reader's on that catalog until the
// transaction ends, however they were sent (EXECUTE in a DO block included). Rolling back
// undoes the change.
const sqlAfterSQL = `
SELECT pg_catalog.pg_current_xact_id()::text,
       EXISTS (SELECT FROM pg_catalog.pg_locks l
               WHERE l.pid = pg_catalog.pg_backend_pid() AND l.locktype = 'relation' AND l.database = 0
                 AND l.relation IN ('pg_catalog.pg_authid'::regclass, 'pg_catalog.pg_auth_members'::regclass,
                                    'pg_catalog.pg_db_role_setting'::regclass)
                 AND l.mode <> 'AccessShareLock')`

// apply checks the login, skips a slot already applied, and runs the statements with the
// slot's marker in one transaction.
func (t *SQLTarget) apply(ctx context.Context, conn *pgx.Conn, r SQLRun) (SQLResult, error) {
	if err := t.checkLogin(ctx, conn); err != nil {
		return SQLResult{}, err
	}
	var res SQLResult
	err := conn.QueryRow(ctx, t.sql.applied, r.Key).Scan(&res.AppliedBy)
	if isUndefinedTable(err) {
		// First use: create the marker table where the login may.
		if err := t.ensureMarkers(ctx, conn); err != nil {
			return res, err
		}
		err = conn.QueryRow(ctx, t.sql.applied, r.Key).Scan(&res.AppliedBy)
	}
	switch {
	case err == nil:
		return res, nil
	case !errors.Is(err, pgx.ErrNoRows):
		return res, fmt.Errorf("SQL target %s: read the slot's marker: %w", t.conf.Name, err)
	}

	tx, err := conn.Begin(ctx)
	if err != nil {
		return res, fmt.Errorf("SQL target %s: begin: %w", t.conf.Name, err)
	}
	defer func() {
		rbCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), sqlCleanupTimeout)
		defer cancel()
		_ = tx.Rollback(rbCtx)
	}()
	scheduledAt := ""
	if !r.ScheduledAt.IsZero() {
		scheduledAt = r.ScheduledAt.UTC().Format(time.RFC3339)
	}
	var began string
	if err := tx.QueryRow(ctx, sqlSettingsSQL, millis(r.Timeout), r.Job, strconv.FormatInt(r.RunID, 10), scheduledAt).Scan(
		nil, nil, nil, nil, &began); err != nil {
		return res, fmt.Errorf("SQL target %s: set the run's settings: %w", t.conf.Name, err)
	}
	// A trigger's vars, as settings: the statements read them, never have them spliced in.
	for name, value := range r.Vars {
		if _, err := tx.Exec(ctx, `SELECT pg_catalog.set_config($1, $2, true)`, "scheduler.var."+name, value); err != nil {
			return res, fmt.Errorf("SQL target %s: set var %s: %w", t.conf.Name, name, err)
		}
	}
	if t.beforeStatements != nil {
		t.beforeStatements()
	}
	if err := t.runBody(ctx, tx, conn, r, &res); err != nil {
		return res, err
	}
	if err := t.checkTransaction(ctx, conn, began); err != nil {
		return res, err
	}
	var slot *time.Time // NULL for a manual run
	if !r.ScheduledAt.IsZero() {
		slot = &r.ScheduledAt
	}
	var marked bool
	err = tx.QueryRow(ctx, t.sql.mark, r.Key, r.Job, slot, r.RunID).Scan(&marked)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		// Another run of this slot committed while these statements ran: theirs stand.
		if err := tx.Rollback(ctx); err != nil {
			return res, fmt.Errorf("SQL target %s: roll back a slot applied by another run: %w", t.conf.Name, err)
		}
		applied, err := t.appliedBy(ctx, conn, r.Key)
		return SQLResult{AppliedBy: applied}, err
	case err != nil:
		return res, fmt.Errorf("SQL target %s: record the slot's marker: %w", t.conf.Name, err)
	}
	if _, err := tx.Exec(ctx, t.sql.purge, r.Job, strconv.FormatInt(int64(t.conf.MarkerRetention/time.Second), 10)+" seconds"); err != nil {
		return res, fmt.Errorf("SQL target %s: purge old markers: %w", t.conf.Name, err)
	}
	if err := tx.Commit(ctx); err != nil {
		return res, fmt.Errorf("SQL target %s: commit: %w", t.conf.Name, err)
	}
	return res, nil
}

// runBody runs what the run commits with its marker: the job's statements, or its River
// job's insert.
func (t *SQLTarget) runBody(ctx context.Context, tx pgx.Tx, conn *pgx.Conn, r SQLRun, res *SQLResult) error {
	if r.River != nil {
		var err error
		if res.River, err = t.insertRiver(ctx, tx, r); err != nil {
			return err
		}
		res.Statements, res.RowsAffected = 1, 1
		if res.River.Duplicate {
			res.RowsAffected = 0
		}
		return nil
	}
	var err error
	if res.Statements, res.RowsAffected, err = execStatements(ctx, conn.PgConn(), r.Statements); err != nil {
		return fmt.Errorf("the statements failed: %w", err)
	}
	return nil
}

// checkTransaction fails a run whose statements left the transaction the runner began
// (began), or changed a role in it. TransactionControl refuses such text before it runs;
// this finds what got past it.
func (t *SQLTarget) checkTransaction(ctx context.Context, conn *pgx.Conn, began string) error {
	ended := errors.New("the statements ended the run's transaction (COMMIT, ROLLBACK, END or the like), which SQL jobs may not do: " +
		"what ran before it may have committed without the slot's marker")
	if conn.PgConn().TxStatus() != 'T' {
		return ended
	}
	var now string
	var roleChanged bool
	if err := conn.QueryRow(ctx, sqlAfterSQL).Scan(&now, &roleChanged); err != nil {
		return fmt.Errorf("SQL target %s: read the run's transaction: %w", t.conf.Name, err)
	}
	switch {
	case now != began:
		return ended
	case roleChanged:
		return fmt.Errorf("SQL target %s: the statements changed a role (ALTER ROLE, a password, a role setting or membership), which SQL jobs may not do: "+
			"nothing was committed; an administrator changes login %s if it must change", t.conf.Name, t.Login())
	}
	return nil
}

func (t *SQLTarget) appliedBy(ctx context.Context, conn *pgx.Conn, key string) (int64, error) {
	var id int64
	if err := conn.QueryRow(ctx, t.sql.applied, key).Scan(&id); err != nil {
		return 0, fmt.Errorf("SQL target %s: read the marker of the run that applied the slot: %w", t.conf.Name, err)
	}
	return id, nil
}
