package targets

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/schedulerhq/scheduler/internal/store"
)

// What a target's login must not be or hold, checked at start and before every run, since a
// grant may come later. The scheduler's database may be a target (an application keeps its
// tables beside the scheduler's), so each of these would hand a job the scheduler:
//   - superuser, BYPASSRLS: everything, or every marker of every login;
//   - CREATEROLE: it may grant itself the roles below;
//   - pg_write_all_data, pg_read_all_data: the scheduler's tables;
//   - pg_signal_backend: terminating the scheduler's own sessions, the leader's among them;
//   - pg_execute_server_program, pg_read/write_server_files: the server itself;
//   - the scheduler's login: its privileges;
//   - any privilege on a table or sequence of the scheduler (leader row, runs, definitions,
//     settings, audit, control messages, migrations), or CREATE on their schema, where a
//     function of a closer-matching signature would run as the scheduler when it calls
//     the built-in one.
//
// scheduler_sql_runs is the job side's table, not the scheduler's.
var refusedMemberships = []string{"pg_write_all_data", "pg_read_all_data", "pg_signal_backend",
	"pg_execute_server_program", "pg_read_server_files", "pg_write_server_files"}

// loginCheckSQL reads what the login is and holds. The scheduler's schema is the one that
// holds scheduler_leader; in a database without it only the role's own attributes count.
const loginCheckSQL = `
WITH me AS (
    SELECT r.rolname, r.rolsuper, r.rolbypassrls, r.rolcreaterole
    FROM pg_catalog.pg_roles r WHERE r.rolname = current_user
), sched AS (
    SELECT c.relnamespace AS nsp FROM pg_catalog.pg_class c
    WHERE c.oid = pg_catalog.to_regclass('public.scheduler_leader')
)
SELECT me.rolname::text, me.rolsuper, me.rolbypassrls, me.rolcreaterole,
       ARRAY(SELECT b.rolname::text FROM pg_catalog.pg_roles b
             WHERE b.rolname = ANY($1::text[]) AND pg_catalog.pg_has_role(current_user, b.oid, 'MEMBER')
             ORDER BY 1) AS memberships,
       ARRAY(SELECT c.relname::text FROM pg_catalog.pg_class c JOIN sched ON c.relnamespace = sched.nsp
             WHERE c.relkind IN ('r', 'p', 'v', 'm', 'S', 'f')
               AND c.relname ~ $2 AND c.relname <> 'scheduler_sql_runs'
               AND CASE WHEN c.relkind = 'S'
                        THEN pg_catalog.has_sequence_privilege(c.oid, 'USAGE, SELECT, UPDATE')
                        ELSE pg_catalog.has_table_privilege(c.oid, 'SELECT, INSERT, UPDATE, DELETE, TRUNCATE, REFERENCES, TRIGGER')
                   END
             ORDER BY 1 LIMIT 5) AS tables,
       coalesce((SELECT pg_catalog.has_schema_privilege(sched.nsp, 'CREATE') FROM sched), false) AS schema_create
FROM me`

// checkLogin refuses a login that could reach the scheduler (see refusedMemberships), with
// an error wrapping ErrTargetRefused that says what to change.
func (t *SQLTarget) checkLogin(ctx context.Context, conn *pgx.Conn) error {
	var (
		login                     string
		super, bypass, createRole bool
		memberships, tables       []string
		schemaCreate              bool
	)
	roles := append([]string{t.conf.SchedulerLogin}, refusedMemberships...)
	if err := conn.QueryRow(ctx, loginCheckSQL, roles, store.ControlTables).Scan(&login, &super, &bypass, &createRole,
		&memberships, &tables, &schemaCreate); err != nil {
		return fmt.Errorf("SQL target %s: read what its login may do: %w", t.conf.Name, err)
	}
	var why []string
	if super {
		why = append(why, "is a superuser")
	}
	if bypass {
		why = append(why, "has BYPASSRLS")
	}
	if createRole {
		why = append(why, "has CREATEROLE")
	}
	if login == t.conf.SchedulerLogin {
		why = append(why, "is the scheduler's own login")
	} else if len(memberships) > 0 {
		why = append(why, "is a member of "+strings.Join(memberships, ", "))
	}
	if len(tables) > 0 {
		why = append(why, "holds privileges on the scheduler's tables ("+strings.Join(tables, ", ")+")")
	}
	if schemaCreate {
		why = append(why, "may CREATE in the scheduler's schema")
	}
	if len(why) == 0 {
		return nil
	}
	return fmt.Errorf("%w: SQL target %s's login %s %s; give SQL jobs a login of their own with only the privileges on the application's tables they need",
		ErrTargetRefused, t.conf.Name, login, strings.Join(why, ", "))
}

// markersSQL creates the marker table. Row-level security, forced on the owner too, keeps
// each login to its own markers when several targets share a database: a job cannot forge a
// marker that would make another login's slot look applied, nor delete one to run it twice.
// The key is unique per login, so no login's keys collide with another's.
const markersSQL = `
SELECT pg_catalog.pg_advisory_xact_lock(pg_catalog.hashtextextended('scheduler_sql_runs', 0));
CREATE TABLE IF NOT EXISTS public.scheduler_sql_runs (
    login        name        NOT NULL DEFAULT current_user,
    key          text        NOT NULL,
    job          text        NOT NULL,
    scheduled_at timestamptz,
    run_id       bigint      NOT NULL,
    committed_at timestamptz NOT NULL DEFAULT pg_catalog.now(),
    PRIMARY KEY (login, key)
);
CREATE INDEX IF NOT EXISTS scheduler_sql_runs_purge ON public.scheduler_sql_runs (login, job, committed_at);
ALTER TABLE public.scheduler_sql_runs ENABLE ROW LEVEL SECURITY;
ALTER TABLE public.scheduler_sql_runs FORCE ROW LEVEL SECURITY;
DROP POLICY IF EXISTS scheduler_sql_runs_own ON public.scheduler_sql_runs;
CREATE POLICY scheduler_sql_runs_own ON public.scheduler_sql_runs
    USING (login = current_user) WITH CHECK (login = current_user);
COMMENT ON TABLE public.scheduler_sql_runs IS
    'Slots of scheduler SQL jobs committed here: a slot whose key is present is not applied again.'`

// InitMarkers creates the marker table on conn (the target's login, or an administrator) in
// its own transaction, and lets login use it. Several replicas may do it at once.
func InitMarkers(ctx context.Context, conn *pgx.Conn, login string) error {
	return pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, markersSQL, pgx.QueryExecModeSimpleProtocol); err != nil {
			return fmt.Errorf("create public.scheduler_sql_runs: %w", err)
		}
		grant := `GRANT SELECT, INSERT, DELETE ON public.scheduler_sql_runs TO ` + pgx.Identifier{login}.Sanitize()
		if _, err := tx.Exec(ctx, grant, pgx.QueryExecModeSimpleProtocol); err != nil {
			return fmt.Errorf("grant %s the use of public.scheduler_sql_runs: %w", login, err)
		}
		return nil
	})
}

// Check connects to the target, refuses a login that could reach the scheduler (an error
// wrapping ErrTargetRefused), and creates the marker table where the login may. Replicas call
// it at start.
func (t *SQLTarget) Check(ctx context.Context) error {
	conf := t.conf.Conn.Copy()
	conf.RuntimeParams["application_name"] = ApplicationNameJobPrefix + t.conf.InstanceID + ":check"
	conn, err := pgx.ConnectConfig(ctx, conf)
	if err != nil {
		return fmt.Errorf("connect to SQL target %s: %w", t.conf.Name, err)
	}
	defer func() { _ = conn.Close(context.WithoutCancel(ctx)) }()
	if err := t.checkLogin(ctx, conn); err != nil {
		return err
	}
	var exists bool
	if err := conn.QueryRow(ctx, `SELECT pg_catalog.to_regclass('public.scheduler_sql_runs') IS NOT NULL`).Scan(&exists); err != nil {
		return fmt.Errorf("SQL target %s: look for public.scheduler_sql_runs: %w", t.conf.Name, err)
	}
	if exists {
		return nil
	}
	if err := InitMarkers(ctx, conn, t.Login()); err != nil {
		return fmt.Errorf("SQL target %s: its login %s may not create the marker table (%w): run `scheduler sql-target init %s --admin-url <an administrator's URL>`",
			t.conf.Name, t.Login(), errors.Unwrap(err), t.conf.Name)
	}
	return nil
}
