package targets

// Markers: each login keeps its slots' markers in a table of its own,
// scheduler_markers_<login>.scheduler_sql_runs, in a schema the login owns and no other login
// may use. LOCK needs a privilege on the table and naming it needs USAGE on the schema, so
// another login's job can neither lock, read, forge nor delete them, nor make a run wait
// on them. (Until this release every login shared public.scheduler_sql_runs, kept apart by
// row-level security, which one login's LOCK TABLE stalled for all: see migrateMarkersSQL.)
//
// A login may drop or empty its own markers, which lets its own slots run again: that harms
// only its own team, whose statements could as well undo their own effects.

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// markerSchemaPrefix starts the name of every login's marker schema.
const markerSchemaPrefix = "scheduler_markers_"

// ErrNoMarkers wraps the reason a target has no marker table its login could create.
var ErrNoMarkers = errors.New("the SQL target has no marker table")

// MarkerSchema is the schema holding login's markers. A login too long to fit PostgreSQL's
// 63 bytes keeps a prefix of its name and a hash of all of it, so that two long logins
// sharing a prefix get schemas of their own.
func MarkerSchema(login string) string {
	const maxIdent = 63
	if len(markerSchemaPrefix)+len(login) <= maxIdent {
		return markerSchemaPrefix + login
	}
	sum := sha256.Sum256([]byte(login))
	suffix := "_" + hex.EncodeToString(sum[:4])
	keep := maxIdent - len(markerSchemaPrefix) - len(suffix)
	for keep > 0 && !utf8.RuneStart(login[keep]) {
		keep--
	}
	return markerSchemaPrefix + login[:keep] + suffix
}

// markersTable is the quoted, schema-qualified name of login's marker table.
func markersTable(login string) string {
	return pgx.Identifier{MarkerSchema(login), "scheduler_sql_runs"}.Sanitize()
}

// InitMarkers creates login's marker schema on conn (an administrator's connection, or the
// login's own where it may create schemas), owned by login. The table in it is created by
// the login itself at its first check or run (ensureMarkers). Several replicas may do it at
// once.
func InitMarkers(ctx context.Context, conn *pgx.Conn, login string) error {
	schema := MarkerSchema(login)
	create := `CREATE SCHEMA IF NOT EXISTS ` + pgx.Identifier{schema}.Sanitize() + ` AUTHORIZATION ` + pgx.Identifier{login}.Sanitize()
	if _, err := conn.Exec(ctx, create, pgx.QueryExecModeSimpleProtocol); err != nil && !isDuplicate(err) {
		return fmt.Errorf("create schema %s for login %s: %w", schema, login, err)
	}
	var owner string
	if err := conn.QueryRow(ctx, `SELECT pg_catalog.pg_get_userbyid(nspowner)::text FROM pg_catalog.pg_namespace WHERE nspname = $1`,
		schema).Scan(&owner); err != nil {
		return fmt.Errorf("read the owner of schema %s: %w", schema, err)
	}
	if owner != login {
		return fmt.Errorf("schema %s belongs to %s, not to login %s: whoever owns a login's markers can lock or forge them; "+
			"an administrator drops it (DROP SCHEMA %s CASCADE) and runs `scheduler sql-target init` again", schema, owner, login, schema)
	}
	return nil
}

// migrateMarkersSQL creates the marker table in the login's schema and, in the same
// transaction, copies the login's markers from the shared table of earlier releases
// (public.scheduler_sql_runs, whose row-level security shows each login its own): once the
// table exists, every slot applied before the upgrade is in it, and the shared table is
// never read again. $1 says whether the shared table exists and the login may read it.
const migrateMarkersSQL = `
CREATE TABLE IF NOT EXISTS %[1]s (
    key          text        PRIMARY KEY,
    job          text        NOT NULL,
    scheduled_at timestamptz,
    run_id       bigint      NOT NULL,
    committed_at timestamptz NOT NULL DEFAULT pg_catalog.now()
);
CREATE INDEX IF NOT EXISTS scheduler_sql_runs_purge ON %[1]s (job, committed_at);
COMMENT ON TABLE %[1]s IS
    'Slots of scheduler SQL jobs committed here by this login: a slot whose key is present is not applied again.'`

const copyOldMarkersSQL = `
INSERT INTO %s (key, job, scheduled_at, run_id, committed_at)
SELECT key, job, scheduled_at, run_id, committed_at FROM public.scheduler_sql_runs WHERE login = current_user
ON CONFLICT (key) DO NOTHING`

// oldMarkersSQL says whether the shared marker table of earlier releases is there for the
// login to copy its markers from.
const oldMarkersSQL = `
SELECT coalesce(pg_catalog.has_table_privilege(pg_catalog.to_regclass('public.scheduler_sql_runs'), 'SELECT'), false)`

// ensureMarkers makes sure the login's marker table exists, on conn (the login's): it
// creates the schema where the login may, and the table with the login's old markers.
func (t *SQLTarget) ensureMarkers(ctx context.Context, conn *pgx.Conn) error {
	var schemaOwner *string
	var table bool
	if err := conn.QueryRow(ctx, `SELECT (SELECT pg_catalog.pg_get_userbyid(nspowner)::text FROM pg_catalog.pg_namespace WHERE nspname = $1),
		pg_catalog.to_regclass($2) IS NOT NULL`, MarkerSchema(t.Login()), t.markers).Scan(&schemaOwner, &table); err != nil {
		return fmt.Errorf("SQL target %s: look for its marker table: %w", t.conf.Name, err)
	}
	switch {
	case schemaOwner != nil && *schemaOwner != t.Login():
		return fmt.Errorf("SQL target %s: schema %s belongs to %s, not to login %s: whoever owns a login's markers can lock or forge them; "+
			"an administrator drops it (DROP SCHEMA %s CASCADE) and runs `scheduler sql-target init %s`",
			t.conf.Name, MarkerSchema(t.Login()), *schemaOwner, t.Login(), MarkerSchema(t.Login()), t.conf.Name)
	case table:
		return nil
	case schemaOwner != nil: // the schema is the login's: it creates the table
	default:
		if err := t.createMarkerSchema(ctx, conn); err != nil {
			return err
		}
	}
	err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, fmt.Sprintf(migrateMarkersSQL, t.markers), pgx.QueryExecModeSimpleProtocol); err != nil {
			return fmt.Errorf("create %s: %w", t.markers, err)
		}
		var old bool
		if err := tx.QueryRow(ctx, oldMarkersSQL).Scan(&old); err != nil {
			return fmt.Errorf("look for the shared marker table of earlier releases: %w", err)
		}
		if !old {
			return nil
		}
		if _, err := tx.Exec(ctx, fmt.Sprintf(copyOldMarkersSQL, t.markers)); err != nil {
			return fmt.Errorf("copy the login's markers from public.scheduler_sql_runs: %w", err)
		}
		return nil
	})
	if err != nil && !isDuplicate(err) { // a replica beside this one created it first
		return fmt.Errorf("SQL target %s: %w", t.conf.Name, err)
	}
	return nil
}

// createMarkerSchema creates the login's marker schema as the login, which needs CREATE on
// the database; without it, the error names the command an administrator runs.
func (t *SQLTarget) createMarkerSchema(ctx context.Context, conn *pgx.Conn) error {
	err := InitMarkers(ctx, conn, t.Login())
	var pgErr *pgconn.PgError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &pgErr) && pgErr.Code == "42501":
		return fmt.Errorf("SQL target %s: %w %s, and its login %s may not create schema %s (%s): run `scheduler sql-target init %s --admin-url <an administrator's URL>`",
			t.conf.Name, ErrNoMarkers, t.markers, t.Login(), MarkerSchema(t.Login()), pgErr.Message, t.conf.Name)
	}
	return fmt.Errorf("SQL target %s: %w", t.conf.Name, err)
}

// isDuplicate reports an error of two sessions creating one object at once: a unique
// violation in the catalog, a duplicate schema or table, or the table's row type (42710).
func isDuplicate(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && (pgErr.Code == "23505" || pgErr.Code == "42P06" || pgErr.Code == "42P07" || pgErr.Code == "42710")
}
