package targets

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schedulerhq/scheduler/internal/config"
	"github.com/schedulerhq/scheduler/internal/store"
	"github.com/schedulerhq/scheduler/internal/testdb"
)

// sqlFixture is a migrated scheduler database that is also the SQL target (as an application
// keeping its tables beside the scheduler's), reached with a login of the test's own that may
// use the table effects and nothing else. admin is the scheduler's own login (a superuser
// here).
type sqlFixture struct {
	url    string
	admin  *pgxpool.Pool
	login  string
	target *SQLTarget
}

func newSQLFixture(t *testing.T, grants ...string) *sqlFixture {
	t.Helper()
	u := testdb.New(t)
	f := &sqlFixture{url: u, admin: testdb.Pool(t, u)}
	f.exec(t, `CREATE TABLE effects (key text, note text NOT NULL DEFAULT '')`)
	grants = append([]string{`GRANT SELECT, INSERT, UPDATE ON effects TO %s`}, grants...)
	var loginURL string
	f.login, loginURL = testdb.Login(t, u, grants...)
	conn, err := pgx.Connect(sqlTestCtx(t), u)
	require.NoError(t, err)
	defer conn.Close(context.Background())
	require.NoError(t, InitMarkers(sqlTestCtx(t), conn, f.login))
	f.target = newTestTarget(t, "APP", loginURL)
	return f
}

func newTestTarget(t *testing.T, name, u string) *SQLTarget {
	t.Helper()
	conn, err := store.ConnConfig(u, store.Options{InstanceID: "test", LeaseTimeout: config.LeaseTimeoutDefault})
	require.NoError(t, err)
	return NewSQLTarget(SQLTargetConfig{Name: name, Conn: conn, InstanceID: "test", SchedulerLogin: "postgres",
		MarkerRetention: 24 * time.Hour})
}

func (f *sqlFixture) exec(t *testing.T, sql string, args ...any) {
	t.Helper()
	_, err := f.admin.Exec(sqlTestCtx(t), sql, args...)
	require.NoError(t, err, sql)
}

func (f *sqlFixture) count(t *testing.T, sql string, args ...any) int {
	t.Helper()
	var n int
	require.NoError(t, f.admin.QueryRow(sqlTestCtx(t), sql, args...).Scan(&n), sql)
	return n
}

func sqlRun(key, statements string) SQLRun {
	return SQLRun{Key: key, Job: "nightly-sql", RunID: 7, ScheduledAt: time.Date(2026, 11, 26, 2, 0, 0, 0, time.UTC),
		Statements: statements, Timeout: 30 * time.Second}
}

func sqlTestCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func TestSQLTargetRunsStatementsOncePerSlot(t *testing.T) {
	f := newSQLFixture(t)
	ctx := sqlTestCtx(t)
	statements := `INSERT INTO effects VALUES (current_setting('scheduler.scheduled_at'), current_setting('scheduler.job'));
		UPDATE effects SET note = note || ':' || current_setting('scheduler.run_id')`
	res, err := f.target.Run(ctx, sqlRun("slot-1", statements))
	require.NoError(t, err)
	assert.Equal(t, SQLResult{Statements: 2, RowsAffected: 1}, res)
	assert.Equal(t, 1, f.count(t, `SELECT count(*) FROM effects WHERE key = '2026-11-26T02:00:00Z' AND note = 'nightly-sql:7'`))

	again := sqlRun("slot-1", statements)
	again.RunID = 8
	res, err = f.target.Run(ctx, again)
	require.NoError(t, err)
	assert.Equal(t, SQLResult{AppliedBy: 7}, res, "a second run of the slot finds the first's marker")
	assert.Equal(t, 1, f.count(t, `SELECT count(*) FROM effects`), "and runs nothing")

	_, err = f.target.Run(ctx, sqlRun("slot-2", `INSERT INTO effects VALUES ('two'); SELECT 1/0`))
	require.ErrorContains(t, err, "division by zero")
	assert.Zero(t, f.count(t, `SELECT count(*) FROM effects WHERE key = 'two'`), "a failed run commits nothing")
	assert.Zero(t, f.count(t, `SELECT count(*) FROM `+f.target.markers+` WHERE key = 'slot-2'`), "nor its marker")
}

// Runs of one slot at once (a recovery beside a run a dead leader left going) commit once.
func TestSQLTargetConcurrentRunsOfOneSlotCommitOnce(t *testing.T) {
	f := newSQLFixture(t)
	ctx := sqlTestCtx(t)
	for round := 0; round < 5; round++ {
		key := fmt.Sprintf("slot-%d", round)
		var wg sync.WaitGroup
		results := make([]SQLResult, 4)
		for i := range results {
			wg.Add(1)
			go func() {
				defer wg.Done()
				r := sqlRun(key, `INSERT INTO effects (key) VALUES ('`+key+`'); SELECT pg_sleep(0.05)`)
				r.RunID = int64(100*round + i + 1)
				var err error
				results[i], err = f.target.Run(ctx, r)
				assert.NoError(t, err)
			}()
		}
		wg.Wait()
		assert.Equal(t, 1, f.count(t, `SELECT count(*) FROM effects WHERE key = $1`, key), "slot %s committed once", key)
		applied := 0
		for _, r := range results {
			if r.AppliedBy == 0 {
				applied++
			}
		}
		assert.Equal(t, 1, applied, "one run applied slot %s; the others found it applied", key)
	}
}

// The attack: statements that rename their session and loop, trapping every cancel. The run
// returns within 5 s of its context's end, and only once the backend is gone. The trap's
// block is left only when it catches a cancel: a loop that left it at every sleep would let
// a cancel land between two blocks now and then, and end the statements before the trap.
func TestSQLTargetEndsABackendThatTrapsCancels(t *testing.T) {
	f := newSQLFixture(t)
	// The run's context ends once the loop that traps cancels runs (its backend sleeps in
	// pg_sleep): a cancel that came sooner (a slow connect under load) would end the
	// statements before the trap.
	ctx, cancel := context.WithCancel(sqlTestCtx(t))
	defer cancel()
	stoppedAt := make(chan time.Time, 1)
	go func() {
		defer cancel()
		for ctx.Err() == nil {
			var trapping bool
			err := f.admin.QueryRow(ctx, `SELECT EXISTS (SELECT FROM pg_stat_activity
				WHERE usename = $1 AND application_name = 'innocent' AND wait_event = 'PgSleep')`, f.login).Scan(&trapping)
			if err != nil || trapping {
				break
			}
			time.Sleep(10 * time.Millisecond) // polling pg_stat_activity: there is no event to await
		}
		stoppedAt <- time.Now()
	}()
	_, err := f.target.Run(ctx, sqlRun("loop", `SET application_name = 'innocent';
		DO $$ BEGIN LOOP BEGIN LOOP PERFORM pg_sleep(0.05); END LOOP; EXCEPTION WHEN query_canceled THEN NULL; END; END LOOP; END $$`))
	require.ErrorIs(t, err, context.Canceled)
	elapsed := time.Since(<-stoppedAt)
	t.Logf("the run returned %s after its context ended", elapsed.Round(time.Millisecond))
	assert.Less(t, elapsed, 5*time.Second, "returned within 5 s of its end")
	assert.Greater(t, elapsed, 2*time.Second, "the cancel was trapped, so the backend was terminated after 2 s")
	// The runner's own connection that terminated it (application_name …:stop) closes as
	// Run returns, and its backend may take a moment to leave.
	assert.Zero(t, f.count(t, `SELECT count(*) FROM pg_stat_activity WHERE usename = $1 AND application_name NOT LIKE '%:stop'`, f.login),
		"the job's backend is gone when Run returns")
	assert.Eventually(t, func() bool {
		return f.count(t, `SELECT count(*) FROM pg_stat_activity WHERE usename = $1`, f.login) == 0
	}, 5*time.Second, 20*time.Millisecond, "no backend of the target's login is left")
}

// A cancel that works ends the run without a terminate: with the terminate 30 s away (and
// the statement a 30 s sleep), only the cancel can end the run within 10 s, however loaded
// the machine.
func TestSQLTargetCancelsAStatementThatHonoursIt(t *testing.T) {
	f := newSQLFixture(t)
	f.target.terminateAfter = 30 * time.Second
	ctx, cancel := context.WithCancel(sqlTestCtx(t))
	go func() { time.Sleep(200 * time.Millisecond); cancel() }() // the cancel is the input here, not a wait
	start := time.Now()
	_, err := f.target.Run(ctx, sqlRun("sleep", `SELECT pg_sleep(30)`))
	require.ErrorIs(t, err, context.Canceled)
	assert.Less(t, time.Since(start), 10*time.Second)
}

// A cancel that lands while the backend waits between the runner's own statements is
// dropped by the server; the runner sends it again, so the job's statement that follows is
// cancelled too and the run ends long before the 30 s terminate.
func TestSQLTargetCancelsAStatementThatStartsAfterTheFirstCancel(t *testing.T) {
	f := newSQLFixture(t)
	f.target.terminateAfter = 30 * time.Second
	f.target.cancelSent.Init()
	ctx, cancel := context.WithCancel(sqlTestCtx(t))
	f.target.beforeStatements = func() {
		cancel()
		f.target.cancelSent.Await(t, 10*time.Second, "the first cancel request, sent while the backend is idle")
	}
	start := time.Now()
	_, err := f.target.Run(ctx, sqlRun("late", `SELECT pg_sleep(30)`))
	require.ErrorIs(t, err, context.Canceled)
	assert.Less(t, time.Since(start), 10*time.Second, "a cancel sent again ended the statement before the terminate")
}

// What a job's statements do to their session stays there: a temporary table shadowing the
// marker table, a COMMIT that would split the slot from its marker.
func TestSQLTargetStatementsCannotForgeOrSplitTheMarker(t *testing.T) {
	f := newSQLFixture(t)
	ctx := sqlTestCtx(t)
	_, err := f.target.Run(ctx, sqlRun("shadow", `CREATE TEMP TABLE scheduler_sql_runs (login name, key text, job text,
		scheduled_at timestamptz, run_id bigint, committed_at timestamptz, PRIMARY KEY (login, key))`))
	require.NoError(t, err)
	assert.Equal(t, 1, f.count(t, `SELECT count(*) FROM `+f.target.markers+` WHERE key = 'shadow'`))

	_, err = f.target.Run(ctx, sqlRun("split", `INSERT INTO effects (key) VALUES ('split'); COMMIT; SELECT 1`))
	require.ErrorContains(t, err, "statement 2: COMMIT")
	assert.Zero(t, f.count(t, `SELECT count(*) FROM `+f.target.markers+` WHERE key = 'split'`))
	assert.Zero(t, f.count(t, `SELECT count(*) FROM effects WHERE key = 'split'`))
}

// Two logins sharing a database: one cannot see, forge or delete the other's markers, which
// sit in a schema of the other's own.
func TestSQLTargetLoginsCannotTouchEachOthersMarkers(t *testing.T) {
	f := newSQLFixture(t)
	ctx := sqlTestCtx(t)
	_, hostile := f.newLoginTarget(t, "HOSTILE")

	// The hostile login deletes the victim's past markers, and forges one for a future slot.
	_, err := f.target.Run(ctx, sqlRun("past", `INSERT INTO effects (key) VALUES ('past')`))
	require.NoError(t, err)
	for _, attack := range []string{`DELETE FROM ` + f.target.markers,
		`INSERT INTO ` + f.target.markers + ` (key, job, run_id) VALUES ('future', 'nightly-sql', 1)`,
		`SELECT count(*) FROM ` + f.target.markers} {
		_, err = hostile.Run(ctx, sqlRun("attack", attack))
		require.ErrorContains(t, err, "permission denied for schema "+MarkerSchema(f.login), attack)
	}
	_, err = hostile.Run(ctx, sqlRun("attack-2", `DELETE FROM `+hostile.markers+`; INSERT INTO `+hostile.markers+` (key, job, run_id) VALUES ('future', 'nightly-sql', 1)`))
	require.NoError(t, err, "it may write its own markers")

	assert.Equal(t, 1, f.count(t, `SELECT count(*) FROM `+f.target.markers+` WHERE key = 'past'`), "the victim's marker stands")
	res, err := f.target.Run(ctx, sqlRun("future", `INSERT INTO effects (key) VALUES ('future')`))
	require.NoError(t, err)
	assert.Zero(t, res.AppliedBy, "the victim's slot runs: another login's key is not its")
	assert.Equal(t, 1, f.count(t, `SELECT count(*) FROM effects WHERE key = 'future'`))
}

// A login that could reach the scheduler is refused, each way named.
func TestSQLTargetRefusesLoginsThatReachTheScheduler(t *testing.T) {
	u := testdb.New(t)
	for _, tc := range []struct{ grant, want string }{
		{`ALTER ROLE %s SUPERUSER`, "is a superuser"},
		{`ALTER ROLE %s BYPASSRLS`, "has BYPASSRLS"},
		{`ALTER ROLE %s CREATEROLE`, "has CREATEROLE"},
		{`GRANT pg_write_all_data TO %s`, "is a member of pg_write_all_data"},
		{`GRANT pg_read_all_data TO %s`, "is a member of pg_read_all_data"},
		{`GRANT pg_signal_backend TO %s`, "is a member of pg_signal_backend"},
		{`GRANT postgres TO %s`, "is a member of postgres"},
		{`GRANT UPDATE ON scheduler_leader TO %s`, "holds privileges on the scheduler's tables: public.scheduler_leader"},
		{`GRANT SELECT ON job_runs TO %s`, "public.job_runs"},
		{`GRANT USAGE ON SEQUENCE job_runs_id_seq TO %s`, "public.job_runs_id_seq"},
		{`GRANT CREATE ON SCHEMA public TO %s`, "may CREATE in the scheduler's schema public"},
	} {
		t.Run(tc.want, func(t *testing.T) {
			_, loginURL := testdb.Login(t, u, tc.grant)
			err := newTestTarget(t, "APP", loginURL).Check(sqlTestCtx(t))
			require.ErrorIs(t, err, ErrTargetRefused)
			assert.ErrorContains(t, err, tc.want)
		})
	}
	t.Run("a login of its own", func(t *testing.T) {
		_, loginURL := testdb.Login(t, u)
		err := newTestTarget(t, "APP", loginURL).Check(sqlTestCtx(t))
		require.Error(t, err, "it may not create the marker table in the scheduler's schema")
		assert.NotErrorIs(t, err, ErrTargetRefused)
		assert.ErrorContains(t, err, "scheduler sql-target init APP")
	})
}

// Runs beyond SCHEDULER_SQL_CONNECTIONS wait for a connection; a run that cannot get one
// before its deadline says so.
func TestSQLTargetBoundsItsConnections(t *testing.T) {
	f := newSQLFixture(t)
	f.target.slots = make(chan struct{}, 1)
	f.target.slots <- struct{}{} // the one connection is taken
	ctx, cancel := context.WithTimeout(sqlTestCtx(t), 100*time.Millisecond)
	defer cancel()
	_, err := f.target.Run(ctx, sqlRun("waits", `SELECT 1`))
	require.ErrorContains(t, err, "waiting for a connection to SQL target APP")
}
