package targets

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/jackc/pgx/v5"

	"github.com/schedulerhq/scheduler/internal/store"
)

// What a target's login must not be or hold, checked at start and before every run, since a
// grant may come later. The scheduler's database may be a target (an application keeps its
// tables beside the scheduler's), so each of these would hand a job the scheduler:
//   - superuser, BYPASSRLS: everything, or every row that row-level security keeps from it;
//   - CREATEROLE: it may grant itself the roles below;
//   - pg_write_all_data, pg_read_all_data: the scheduler's tables;
//   - pg_signal_backend: terminating the scheduler's own sessions, the leader's among them;
//   - pg_execute_server_program, pg_read/write_server_files: the server itself;
//   - the scheduler's login: its privileges;
//   - any privilege on a table or sequence of the scheduler (leader row, runs, definitions,
//     settings, audit, control messages, migrations), in whatever schema holds them: on the
//     table, on one of its columns (UPDATE (epoch) on the leader row is enough to depose a
//     leader), as its owner, or to come through default privileges on the tables the
//     scheduler's owner creates next;
//   - CREATE on, or ownership of, their schema, where a function of a closer-matching
//     signature would run as the scheduler when it calls the built-in one.
//
// Each is looked for in the login and in every role it is a member of, since SET ROLE gives
// a job whatever a NOINHERIT membership holds back. scheduler_sql_runs is the job side's
// table, not the scheduler's.
var refusedMemberships = []string{"pg_write_all_data", "pg_read_all_data", "pg_signal_backend",
	"pg_execute_server_program", "pg_read_server_files", "pg_write_server_files"}

// loginCheckSQL reads what the login is and holds ($1: the refused memberships, $2:
// store.ControlTables). The scheduler's schemas are those holding one of its anchor tables;
// in a database without them only the role's own attributes and settings count.
const loginCheckSQL = `
WITH me AS (
    SELECT r.oid, r.rolname, r.rolsuper, r.rolbypassrls, r.rolcreaterole
    FROM pg_catalog.pg_roles r WHERE r.rolname = session_user
), mine AS (
    -- the login and every role whose privileges it has or may SET ROLE to
    SELECT r.oid FROM pg_catalog.pg_roles r, me WHERE pg_catalog.pg_has_role(me.oid, r.oid, 'MEMBER')
), sched_nsp AS (
    SELECT DISTINCT c.relnamespace AS oid FROM pg_catalog.pg_class c
    WHERE c.relname IN ('scheduler_leader', 'job_runs', 'job_definitions') AND c.relkind IN ('r', 'p')
), sched AS (
    SELECT c.oid, c.relkind, c.relowner, pg_catalog.format('%I.%I', n.nspname, c.relname) AS name
    FROM pg_catalog.pg_class c JOIN sched_nsp s ON s.oid = c.relnamespace
    JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
    WHERE c.relkind IN ('r', 'p', 'v', 'm', 'S', 'f') AND c.relname ~ $2 AND c.relname <> 'scheduler_sql_runs'
), reached AS (
    SELECT s.name || CASE
        WHEN EXISTS (SELECT FROM mine m WHERE m.oid = s.relowner) THEN ' (owner)'
        WHEN EXISTS (SELECT FROM mine m WHERE CASE WHEN s.relkind = 'S'
                 THEN pg_catalog.has_sequence_privilege(m.oid, s.oid, 'USAGE, SELECT, UPDATE')
                 ELSE pg_catalog.has_table_privilege(m.oid, s.oid, 'SELECT, INSERT, UPDATE, DELETE, TRUNCATE, REFERENCES, TRIGGER') END) THEN ''
        WHEN s.relkind <> 'S' AND EXISTS (SELECT FROM mine m
                 WHERE pg_catalog.has_any_column_privilege(m.oid, s.oid, 'SELECT, INSERT, UPDATE, REFERENCES')) THEN ' (column privileges)'
        END AS what
    FROM sched s
)
SELECT me.rolname::text, me.rolsuper, me.rolbypassrls, me.rolcreaterole,
       ARRAY(SELECT b.rolname::text FROM pg_catalog.pg_roles b
             WHERE b.rolname = ANY($1::text[]) AND pg_catalog.pg_has_role(me.oid, b.oid, 'MEMBER')
             ORDER BY 1) AS memberships,
       ARRAY(SELECT what FROM reached WHERE what IS NOT NULL ORDER BY 1 LIMIT 5) AS tables,
       ARRAY(SELECT n.nspname::text || CASE WHEN EXISTS (SELECT FROM mine m WHERE m.oid = n.nspowner) THEN ' (owner)' ELSE '' END
             FROM pg_catalog.pg_namespace n JOIN sched_nsp s ON s.oid = n.oid
             WHERE EXISTS (SELECT FROM mine m WHERE m.oid = n.nspowner OR pg_catalog.has_schema_privilege(m.oid, n.oid, 'CREATE'))
             ORDER BY 1) AS schemas,
       -- default privileges the scheduler's owners gave for their next tables and sequences,
       -- everywhere or in the scheduler's schemas, to the login, a role of its, or PUBLIC
       ARRAY(SELECT DISTINCT pg_catalog.format('the %s %s creates next%s', CASE d.defaclobjtype WHEN 'r' THEN 'tables' ELSE 'sequences' END,
                    pg_catalog.pg_get_userbyid(d.defaclrole),
                    CASE WHEN d.defaclnamespace = 0 THEN '' ELSE ' in ' || d.defaclnamespace::regnamespace::text END)
             FROM pg_catalog.pg_default_acl d, LATERAL pg_catalog.aclexplode(d.defaclacl) a
             WHERE d.defaclobjtype IN ('r', 'S') AND d.defaclrole IN (SELECT relowner FROM sched)
               AND (d.defaclnamespace = 0 OR d.defaclnamespace IN (SELECT oid FROM sched_nsp))
               AND a.grantee <> d.defaclrole AND (a.grantee = 0 OR a.grantee IN (SELECT oid FROM mine))
             ORDER BY 1) AS defaults,
       -- the login's role settings, everywhere and in this database (roleSettings)
       ARRAY(SELECT c || CASE WHEN s.setdatabase = 0 THEN '' ELSE ' (in this database)' END
             FROM pg_catalog.pg_db_role_setting s, LATERAL pg_catalog.unnest(s.setconfig) c
             WHERE s.setrole = me.oid
               AND s.setdatabase IN (0, (SELECT oid FROM pg_catalog.pg_database WHERE datname = pg_catalog.current_database()))
             ORDER BY 1) AS settings
FROM me`

// checkLogin refuses a login that could reach the scheduler (see refusedMemberships), or
// whose role settings changed since its first check (roleSettings), with an error wrapping
// ErrTargetRefused that says what to change.
func (t *SQLTarget) checkLogin(ctx context.Context, conn *pgx.Conn) error {
	var (
		login                     string
		super, bypass, createRole bool
		memberships, tables       []string
		schemas, defaults         []string
		settings                  []string
	)
	roles := append([]string{t.conf.SchedulerLogin}, refusedMemberships...)
	if err := conn.QueryRow(ctx, loginCheckSQL, roles, store.ControlTables).Scan(&login, &super, &bypass, &createRole,
		&memberships, &tables, &schemas, &defaults, &settings); err != nil {
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
		why = append(why, "holds privileges on the scheduler's tables: "+strings.Join(tables, ", "))
	}
	if len(schemas) > 0 {
		why = append(why, "may CREATE in the scheduler's schema "+strings.Join(schemas, ", "))
	}
	if len(defaults) > 0 {
		why = append(why, "is granted default privileges on "+strings.Join(defaults, ", "))
	}
	if len(why) > 0 {
		return fmt.Errorf("%w: SQL target %s's login %s %s; give SQL jobs a login of their own with only the privileges on the application's tables they need",
			ErrTargetRefused, t.conf.Name, login, strings.Join(why, "; "))
	}
	return t.roleSettings.check(t.conf.Name, login, settings)
}

// roleSettings are a login's role settings (ALTER ROLE … SET) as its target's first check
// found them. A login may set its own, so a job could (ALTER ROLE CURRENT_USER SET …): the
// run that tries fails and rolls it back (checkTransaction), and a change that came another
// way is found here before the next run. The session's own settings hold regardless
// (sessionConfig); a changed setting means someone used the login outside its runs.
type roleSettings struct {
	mu    sync.Mutex
	first []string // nil until the first check
}

func (rs *roleSettings) check(target, login string, now []string) error {
	if now == nil {
		now = []string{}
	}
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if rs.first == nil {
		rs.first = now
		return nil
	}
	if slices.Equal(rs.first, now) {
		return nil
	}
	show := func(s []string) string {
		if len(s) == 0 {
			return "none"
		}
		return strings.Join(s, ", ")
	}
	return fmt.Errorf("%w: SQL target %s's login %s: its role settings changed since this replica first checked it (now: %s; then: %s), "+
		"which a job or anyone knowing its password may have done (ALTER ROLE %s SET …). An administrator looks at who changed it, "+
		"puts the settings back (ALTER ROLE %s RESET …, or RESET ALL), and if the login's password may be known, changes it; "+
		"a replica restarted takes the settings it finds as the login's",
		ErrTargetRefused, target, login, show(now), show(rs.first), login, login)
}

// Check connects to the target, refuses a login that could reach the scheduler (an error
// wrapping ErrTargetRefused), and creates the login's marker table where it may (an error
// wrapping ErrNoMarkers where it may not). Replicas call it at start.
func (t *SQLTarget) Check(ctx context.Context) error {
	conn, err := t.connect(ctx, "check", sqlCheckTimeout)
	if err != nil {
		return err
	}
	defer func() { _ = conn.Close(context.WithoutCancel(ctx)) }()
	if err := t.checkLogin(ctx, conn); err != nil {
		return err
	}
	return t.ensureMarkers(ctx, conn)
}
