package targets

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schedulerhq/scheduler/internal/testdb"
)

// newLoginTarget adds a second login and target to f's database, as a second team's.
func (f *sqlFixture) newLoginTarget(t *testing.T, name string) (string, *SQLTarget) {
	t.Helper()
	login, loginURL := testdb.Login(t, f.url, `GRANT SELECT, INSERT, UPDATE ON effects TO %s`)
	conn, err := pgx.Connect(sqlTestCtx(t), f.url)
	require.NoError(t, err)
	defer conn.Close(context.Background())
	require.NoError(t, InitMarkers(sqlTestCtx(t), conn, login))
	return login, newTestTarget(t, name, loginURL)
}

// awaitSleeping waits until a backend of login sleeps in pg_sleep.
func (f *sqlFixture) awaitSleeping(t *testing.T, login string) {
	t.Helper()
	require.Eventually(t, func() bool {
		return f.count(t, `SELECT count(*) FROM pg_stat_activity WHERE usename = $1 AND wait_event = 'PgSleep'`, login) > 0
	}, 20*time.Second, 20*time.Millisecond, "the hostile job sleeps holding what it could lock")
}

// The attack: one login's job locks every marker table it can name and sleeps. Another
// login's runs on the same database go on as if nothing happened.
func TestSQLTargetLockOnAnotherLoginsMarkersCannotDelayItsRuns(t *testing.T) {
	f := newSQLFixture(t)
	hostileLogin, hostile := f.newLoginTarget(t, "HOSTILE")
	ctx := sqlTestCtx(t)
	_, err := f.target.Run(ctx, sqlRun("before", `INSERT INTO effects (key) VALUES ('before')`))
	require.NoError(t, err, "the victim's markers exist")

	attackCtx, stopAttack := context.WithCancel(ctx)
	defer stopAttack()
	attacked := make(chan error, 1)
	go func() {
		_, err := hostile.Run(attackCtx, sqlRun("lock", `DO $$ DECLARE r regclass; BEGIN
			FOR r IN SELECT c.oid FROM pg_class c WHERE c.relname = 'scheduler_sql_runs' LOOP
				BEGIN EXECUTE format('LOCK TABLE %s IN ACCESS EXCLUSIVE MODE', r);
				EXCEPTION WHEN OTHERS THEN NULL; END;
			END LOOP; END $$;
			SELECT pg_sleep(20)`))
		attacked <- err
	}()
	f.awaitSleeping(t, hostileLogin)

	runCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	start := time.Now()
	res, err := f.target.Run(runCtx, sqlRun("during", `INSERT INTO effects (key) VALUES ('during')`))
	require.NoError(t, err, "the victim's run is not delayed by the other login's locks")
	assert.Zero(t, res.AppliedBy)
	res, err = f.target.Run(runCtx, sqlRun("before", `INSERT INTO effects (key) VALUES ('before')`))
	require.NoError(t, err)
	assert.Equal(t, int64(7), res.AppliedBy, "and its earlier marker still counts")
	t.Logf("two runs of the victim took %s while the other login held its locks", time.Since(start).Round(time.Millisecond))
	stopAttack()
	<-attacked
}

// The attack: a job changes its own login (a password it then knows, a setting that outlives
// the run). The change is rolled back with the run, which fails saying so.
func TestSQLTargetStatementsCannotChangeTheirLogin(t *testing.T) {
	f := newSQLFixture(t)
	ctx := sqlTestCtx(t)
	for _, stmt := range []string{
		`ALTER ROLE CURRENT_USER PASSWORD 'known-to-the-team'`,
		`ALTER ROLE CURRENT_USER SET statement_timeout = 0`,
		`DO $$ BEGIN EXECUTE 'ALTER ROLE ' || quote_ident(current_user) || ' SET lock_timeout = 0'; END $$`,
	} {
		_, err := f.target.Run(ctx, sqlRun("role", `INSERT INTO effects (key) VALUES ('role'); `+stmt))
		require.ErrorContains(t, err, "changed a role", stmt)
		assert.ErrorContains(t, err, "nothing was committed")
		assert.Zero(t, f.count(t, `SELECT count(*) FROM pg_authid WHERE rolname = $1 AND rolpassword IS NOT NULL`, f.login), stmt)
		assert.Zero(t, f.count(t, `SELECT count(*) FROM pg_db_role_setting s JOIN pg_roles r ON r.oid = s.setrole WHERE r.rolname = $1`, f.login), stmt)
		assert.Zero(t, f.count(t, `SELECT count(*) FROM effects WHERE key = 'role'`), stmt)
	}
}

// A login changed some other way (a session of its own, an administrator) is found before
// the next run, which fails saying what changed and what to do; put back, runs go on.
func TestSQLTargetFindsALoginChangedBetweenRuns(t *testing.T) {
	f := newSQLFixture(t)
	ctx := sqlTestCtx(t)
	require.NoError(t, f.target.Check(ctx))
	f.exec(t, `ALTER ROLE `+pgx.Identifier{f.login}.Sanitize()+` SET statement_timeout = 0`)
	_, err := f.target.Run(ctx, sqlRun("after", `INSERT INTO effects (key) VALUES ('after')`))
	require.ErrorContains(t, err, "role settings changed")
	assert.ErrorContains(t, err, "statement_timeout=0")
	assert.ErrorContains(t, err, "ALTER ROLE "+f.login+" RESET")
	assert.Zero(t, f.count(t, `SELECT count(*) FROM effects`))

	f.exec(t, `ALTER ROLE `+pgx.Identifier{f.login}.Sanitize()+` RESET ALL`)
	_, err = f.target.Run(ctx, sqlRun("after", `INSERT INTO effects (key) VALUES ('after')`))
	require.NoError(t, err)
}

// Whatever the role says (settings an operator left, or a job made before this release), a
// run's session has the settings the runner needs. With standard_conforming_strings off, the
// server would read '\'; SELECT ' as one string and run the COMMIT after it, which the
// runner's reading of the text took for a string.
func TestSQLTargetSessionSettingsHoldWhateverTheRoleSays(t *testing.T) {
	f := newSQLFixture(t)
	ctx := sqlTestCtx(t)
	role := pgx.Identifier{f.login}.Sanitize()
	for _, s := range []string{`standard_conforming_strings = off`, `statement_timeout = 0`, `lock_timeout = 0`,
		`idle_in_transaction_session_timeout = 0`, `default_transaction_read_only = on`, `default_transaction_isolation = 'serializable'`} {
		f.exec(t, `ALTER ROLE `+role+` SET `+s)
	}
	r := sqlRun("settings", `INSERT INTO effects (key, note) SELECT 'settings', concat_ws(',',
		current_setting('standard_conforming_strings'), current_setting('statement_timeout'), current_setting('lock_timeout'),
		current_setting('idle_in_transaction_session_timeout') <> '0', current_setting('transaction_isolation'));
		SELECT '\'; SELECT '; COMMIT; --'`)
	r.Timeout = 7 * time.Second
	_, err := f.target.Run(ctx, r)
	require.NoError(t, err)
	assert.Equal(t, 1, f.count(t, `SELECT count(*) FROM effects WHERE key = 'settings' AND note = 'on,7s,7s,t,read committed'`),
		"got %v", f.note(t, "settings"))
}

// The attack: COMMIT; …; BEGIN between the statements. The run refuses the text before
// anything runs; and if the text ever got past that reading, the runner finds that the
// transaction committing the marker is not the one it began, and fails the run.
func TestSQLTargetRefusesStatementsThatSplitTheTransaction(t *testing.T) {
	f := newSQLFixture(t)
	ctx := sqlTestCtx(t)
	split := `INSERT INTO effects (key) VALUES ('split'); COMMIT; SELECT 1; BEGIN`
	_, err := f.target.Run(ctx, sqlRun("split", split))
	require.ErrorContains(t, err, "statement 2: COMMIT, statement 4: BEGIN")
	assert.Zero(t, f.count(t, `SELECT count(*) FROM effects WHERE key = 'split'`), "nothing ran")

	conn, err := f.target.connect(ctx, "test", time.Minute)
	require.NoError(t, err)
	defer conn.Close(context.Background())
	_, err = f.target.apply(ctx, conn, sqlRun("split", split))
	require.ErrorContains(t, err, "ended the run's transaction")
	assert.Zero(t, f.count(t, `SELECT count(*) FROM `+f.target.markers+` WHERE key = 'split'`), "no marker")
}

// The attacks on the login check: a column grant on the leader row, the scheduler's tables in
// a schema other than public, ownership, and default privileges that would grant the login
// the scheduler's next tables. Each is refused, at Check and before a run.
func TestSQLTargetLoginCheckSeesEverySchemaColumnOwnerAndDefault(t *testing.T) {
	for _, tc := range []struct {
		setup []string
		want  string
	}{
		{[]string{`GRANT UPDATE (epoch) ON scheduler_leader TO %s`}, "public.scheduler_leader (column privileges)"},
		{[]string{`GRANT SELECT (id) ON job_runs TO %s`}, "public.job_runs (column privileges)"},
		{[]string{`CREATE SCHEMA sched`, `ALTER TABLE scheduler_leader SET SCHEMA sched`, `ALTER TABLE job_runs SET SCHEMA sched`,
			`GRANT USAGE ON SCHEMA sched TO %s`, `GRANT UPDATE ON sched.scheduler_leader TO %s`}, "sched.scheduler_leader"},
		{[]string{`CREATE ROLE owners_%[1]s NOLOGIN`, `GRANT owners_%[1]s TO %[1]s`, `ALTER TABLE scheduler_control OWNER TO owners_%[1]s`},
			"public.scheduler_control (owner)"},
		{[]string{`ALTER DEFAULT PRIVILEGES IN SCHEMA public GRANT SELECT ON TABLES TO %s`}, "default privileges"},
		{[]string{`ALTER DEFAULT PRIVILEGES GRANT INSERT ON TABLES TO %s`}, "default privileges"},
	} {
		t.Run(tc.want, func(t *testing.T) {
			u := testdb.New(t) // each case moves or grants things of its own database
			login, loginURL := testdb.Login(t, u)
			admin := testdb.Pool(t, u)
			for _, s := range tc.setup {
				s = fmtRole(s, login)
				_, err := admin.Exec(sqlTestCtx(t), s)
				require.NoError(t, err, s)
			}
			if tc.want == "public.scheduler_control (owner)" {
				t.Cleanup(func() {
					_, _ = admin.Exec(context.Background(), `ALTER TABLE scheduler_control OWNER TO postgres`)
					_, _ = admin.Exec(context.Background(), fmtRole(`DROP ROLE owners_%[1]s`, login))
				})
			}
			err := newTestTarget(t, "APP", loginURL).Check(sqlTestCtx(t))
			require.ErrorIs(t, err, ErrTargetRefused)
			assert.ErrorContains(t, err, tc.want)
		})
	}
}

func (f *sqlFixture) note(t *testing.T, key string) string {
	t.Helper()
	var note string
	require.NoError(t, f.admin.QueryRow(sqlTestCtx(t), `SELECT note FROM effects WHERE key = $1`, key).Scan(&note))
	return note
}

// fmtRole puts login where s has %s or %[1]s.
func fmtRole(s, login string) string {
	if !strings.Contains(s, "%") {
		return s
	}
	return fmt.Sprintf(strings.ReplaceAll(s, "%s", "%[1]s"), login)
}

// oldSharedMarkersSQL is the shared marker table of earlier releases, as they created it.
const oldSharedMarkersSQL = `
CREATE TABLE public.scheduler_sql_runs (
    login        name        NOT NULL DEFAULT current_user,
    key          text        NOT NULL,
    job          text        NOT NULL,
    scheduled_at timestamptz,
    run_id       bigint      NOT NULL,
    committed_at timestamptz NOT NULL DEFAULT pg_catalog.now(),
    PRIMARY KEY (login, key)
);
ALTER TABLE public.scheduler_sql_runs ENABLE ROW LEVEL SECURITY;
ALTER TABLE public.scheduler_sql_runs FORCE ROW LEVEL SECURITY;
CREATE POLICY scheduler_sql_runs_own ON public.scheduler_sql_runs
    USING (login = current_user) WITH CHECK (login = current_user)`

// An upgrade: a slot whose marker an earlier release wrote in the shared table still counts
// as applied, for its own login only.
func TestSQLTargetMarkersOfTheSharedTableStillCount(t *testing.T) {
	f := newSQLFixture(t)
	ctx := sqlTestCtx(t)
	other, otherTarget := f.newLoginTarget(t, "OTHER")
	f.exec(t, oldSharedMarkersSQL)
	for _, l := range []string{f.login, other} {
		f.exec(t, `GRANT SELECT, INSERT, DELETE ON public.scheduler_sql_runs TO `+pgx.Identifier{l}.Sanitize())
	}
	f.exec(t, `INSERT INTO public.scheduler_sql_runs (login, key, job, run_id) VALUES ($1, 'old-slot', 'nightly-sql', 3)`, f.login)

	res, err := f.target.Run(ctx, sqlRun("old-slot", `INSERT INTO effects (key) VALUES ('old-slot')`))
	require.NoError(t, err)
	assert.Equal(t, int64(3), res.AppliedBy, "the slot applied before the upgrade is not applied again")
	res, err = otherTarget.Run(ctx, sqlRun("old-slot", `INSERT INTO effects (key) VALUES ('old-slot')`))
	require.NoError(t, err)
	assert.Zero(t, res.AppliedBy, "another login's old marker is not this login's")
	assert.Equal(t, 1, f.count(t, `SELECT count(*) FROM effects WHERE key = 'old-slot'`))
}

// The attack, end to end on a server that checks passwords: a job sets its login's password.
// The change is rolled back, so later runs still get in; a password changed some other way
// fails the next run saying so, without showing either password.
func TestSQLTargetPasswordChangedByAJob(t *testing.T) {
	const login = "scram_jobs"
	cluster := testdb.NewCluster(t, testdb.ClusterOptions{HBA: []string{"host all " + login + " 127.0.0.1/32 scram-sha-256"}})
	u := cluster.NewDatabase(t, "")
	admin := testdb.Pool(t, u)
	ctx := sqlTestCtx(t)
	for _, s := range []string{`CREATE ROLE ` + login + ` LOGIN PASSWORD 'first-password'`, `CREATE TABLE effects (key text)`,
		`GRANT SELECT, INSERT ON effects TO ` + login} {
		_, err := admin.Exec(ctx, s)
		require.NoError(t, err, s)
	}
	t.Cleanup(func() {
		_, _ = admin.Exec(context.Background(), `DROP OWNED BY `+login)
	})
	conn, err := pgx.Connect(ctx, u)
	require.NoError(t, err)
	require.NoError(t, InitMarkers(ctx, conn, login))
	conn.Close(ctx)
	target := newTestTarget(t, "APP", "postgres://"+login+":first-password@127.0.0.1:"+cluster.Port()+"/"+
		strings.TrimPrefix(must(t, u).Path, "/")+"?sslmode=disable")

	_, err = target.Run(ctx, sqlRun("a", `INSERT INTO effects VALUES ('a'); ALTER ROLE CURRENT_USER PASSWORD 'known-to-the-team'`))
	require.ErrorContains(t, err, "changed a role")
	_, err = target.Run(ctx, sqlRun("b", `INSERT INTO effects VALUES ('b')`))
	require.NoError(t, err, "the job's password never took")

	_, err = admin.Exec(ctx, `ALTER ROLE `+login+` PASSWORD 'changed-elsewhere'`)
	require.NoError(t, err)
	_, err = target.Run(ctx, sqlRun("c", `INSERT INTO effects VALUES ('c')`))
	require.ErrorContains(t, err, "its password no longer matches SCHEDULER_SQL_TARGET_APP")
	assert.ErrorContains(t, err, "a job may have changed it")
	assert.NotContains(t, err.Error(), "first-password")
	assert.NotContains(t, err.Error(), "changed-elsewhere")
}

func must(t *testing.T, u string) *url.URL {
	t.Helper()
	parsed, err := url.Parse(u)
	require.NoError(t, err)
	return parsed
}

// Replicas that find the login's marker table missing at once all create it, or find it
// created, and every run goes on.
func TestSQLTargetReplicasCreateTheMarkerTableAtOnce(t *testing.T) {
	f := newSQLFixture(t)
	ctx := sqlTestCtx(t)
	replicas := make([]*SQLTarget, 4)
	for i := range replicas {
		replicas[i] = NewSQLTarget(f.target.conf)
	}
	errs := make(chan error, len(replicas))
	for i, r := range replicas {
		go func() {
			_, err := r.Run(ctx, sqlRun(fmt.Sprintf("replica-%d", i), `INSERT INTO effects (key) VALUES ('x')`))
			errs <- err
		}()
	}
	for range replicas {
		require.NoError(t, <-errs)
	}
	assert.Equal(t, len(replicas), f.count(t, `SELECT count(*) FROM `+f.target.markers))
}
