package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/schedulerhq/scheduler/internal/runtimejob"
	"github.com/schedulerhq/scheduler/internal/store"
	"github.com/schedulerhq/scheduler/internal/targets"
)

// The hostile SQL jobs of every chaos run (docs/design.md guarantee 12): written by a team
// that wants the scheduler stopped, run in the scheduler's own database through the SQL
// target HOSTILE, whose login holds nothing but its marker rows. The faults and invariants
// are the run's usual ones: they must hold while these jobs run, and no hostile backend
// may outlive its run's timeout by more than 5 s.
const (
	hostileTimeout = 2 * time.Second
	// hostileLoop renames its session to a scheduler's, takes the advisory keys the
	// scheduler once excluded itself with, and loops trapping every cancel.
	hostileLoop = `SET application_name = 'scheduler:chaos-0';
SELECT pg_try_advisory_lock(hashtextextended(k, 0))
FROM unnest(ARRAY['scheduler:active_runs', 'scheduler:job_definitions', 'scheduler:run_partitions']) k;
DO $$ BEGIN LOOP BEGIN PERFORM pg_sleep(0.05); EXCEPTION WHEN query_canceled THEN NULL; END; END LOOP; END $$`
	// hostileNotify sends on every channel the scheduler listens to, with every epoch it
	// may have as payload, and commits (a notification is delivered at commit).
	hostileNotify = `SELECT pg_notify(c, g::text) FROM unnest(ARRAY['%s']) c, generate_series(0, 200) g`
)

// setUpHostile creates the hostile login (cluster-wide, so its name is drawn) and its
// marker table on the run's database as its administrator, defines the hostile jobs, and
// returns the replicas' SCHEDULER_SQL_TARGET_HOSTILE and a function that drops the login.
// dbURL is the URL the run reaches the database through.
func (r *runner) setUpHostile(ctx context.Context, dbURL string) (env string, drop func(), err error) {
	var b [4]byte
	_, _ = rand.Read(b[:])
	role := "chaos_hostile_" + hex.EncodeToString(b[:])
	quoted := pgx.Identifier{role}.Sanitize()
	if _, err := r.pool.Exec(ctx, `CREATE ROLE `+quoted+` LOGIN`); err != nil {
		return "", nil, fmt.Errorf("create the hostile login: %w", err)
	}
	drop = func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_, _ = r.pool.Exec(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = $1`, role)
		_, _ = r.pool.Exec(ctx, `DROP OWNED BY `+quoted)
		_, _ = r.pool.Exec(ctx, `DROP ROLE IF EXISTS `+quoted)
	}
	conn, err := r.pool.Acquire(ctx)
	if err != nil {
		return "", drop, err
	}
	err = targets.InitMarkers(ctx, conn.Conn(), role)
	conn.Release()
	if err != nil {
		return "", drop, err
	}
	db, err := store.Open(ctx, dbURL, store.Options{InstanceID: "chaos", LeaseTimeout: 5 * time.Second})
	if err != nil {
		return "", drop, err
	}
	defer db.Close()
	channels := strings.Join([]string{store.StepDownChannel, store.RunsChannel, store.RunFinishedChannel, store.DefinitionsChannel}, "','")
	for _, d := range []runtimejob.Definition{
		{Name: "hostile-loop", Schedule: runtimejob.Schedules{"@every 3s"}, Timeout: hostileTimeout.String(),
			SQL: &runtimejob.SQLTarget{Target: "HOSTILE", Statements: hostileLoop}},
		{Name: "hostile-notify", Schedule: runtimejob.Schedules{"@every 1s"}, Timeout: "5s",
			SQL: &runtimejob.SQLTarget{Target: "HOSTILE", Statements: fmt.Sprintf(hostileNotify, channels)}},
	} {
		j, errs := runtimejob.Check(d, runtimejob.Env{})
		if errs != nil {
			return "", drop, errs
		}
		body, err := json.Marshal(j.Def)
		if err != nil {
			return "", drop, err
		}
		if _, err := db.CreateDefinition(ctx, j.Def.Name, j.Def.Kind(), body, 10); err != nil {
			return "", drop, fmt.Errorf("define %s: %w", d.Name, err)
		}
	}
	u, err := url.Parse(dbURL)
	if err != nil {
		return "", drop, err
	}
	u.User = url.User(role)
	return "SCHEDULER_SQL_TARGET_HOSTILE=" + u.String(), drop, nil
}

// hostileRuns counts the hostile loop's runs that started (a leader killed while one ran
// leaves it abandoned; one that lives long enough ends it timed_out).
func (r *runner) hostileRuns(ctx context.Context) (int64, error) {
	var n int64
	err := r.pool.QueryRow(ctx, `SELECT count(*) FROM job_runs WHERE job = 'hostile-loop' AND started_at IS NOT NULL`).Scan(&n)
	return n, err
}

// hostileOverstays counts the hostile loop's runs recorded later than its timeout + 5 s,
// and the hostile login's backends alive longer than that now. An abandoned run is not
// counted: it ended when the next leader took over from a holder killed or paused, not when
// its statements stopped, and a statement that outlived it is a backend counted here.
func (r *runner) hostileOverstays(ctx context.Context) (int64, error) {
	limit := (hostileTimeout + 5*time.Second).Seconds()
	var n int64
	err := r.pool.QueryRow(ctx, `
		SELECT (SELECT count(*) FROM job_runs WHERE job = 'hostile-loop' AND finished_at - started_at > make_interval(secs => $1)
		                                      AND status <> 'abandoned')
		     + (SELECT count(*) FROM pg_stat_activity WHERE usename LIKE 'chaos\_hostile\_%'
		                                             AND backend_start < now() - make_interval(secs => $1))`, limit).Scan(&n)
	return n, err
}
