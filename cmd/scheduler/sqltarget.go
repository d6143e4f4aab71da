package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/schedulerhq/scheduler/internal/config"
	"github.com/schedulerhq/scheduler/internal/store"
	"github.com/schedulerhq/scheduler/internal/targets"
)

const sqlTargetUsage = `Usage:
  scheduler sql-target init NAME [--admin-url URL]
      create the schema scheduler_markers_<login> of SQL target NAME's login
      (SCHEDULER_SQL_TARGET_NAME) in its database, owned by the login, which then creates
      its marker table there (copying its markers from the shared public.scheduler_sql_runs
      of earlier releases); then check the login as a replica does at start. With
      --admin-url the schema is created by that login (an administrator of the same
      database), for a target login that may not create schemas.
  scheduler sql-target check NAME
      check, as a replica does at start, that NAME's login cannot reach the scheduler, and
      create its marker table where it may.

Exit codes: 0 ready; 1 refused or failed; 2 usage or configuration.
`

// sqlTargetTimeout bounds the whole command.
const sqlTargetTimeout = 30 * time.Second

func sqlTargetCmd(ctx context.Context, args, environ []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("sql-target", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, sqlTargetUsage) }
	adminURL := fs.String("admin-url", "", "an administrator's URL of the target's database")
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprint(stdout, sqlTargetUsage)
		if len(args) == 0 {
			return exitUsage
		}
		return exitOK
	}
	// The NAME may come before the flags (init APP --admin-url URL), which flag stops at.
	sub, rest, name := args[0], args[1:], ""
	if len(rest) > 0 && !strings.HasPrefix(rest[0], "-") {
		name, rest = rest[0], rest[1:]
	}
	if err := fs.Parse(rest); err != nil {
		if err == flag.ErrHelp {
			return exitOK
		}
		return exitUsage
	}
	if name == "" && fs.NArg() == 1 {
		name = fs.Arg(0)
	} else if fs.NArg() != 0 {
		name = ""
	}
	if (sub != "init" && sub != "check") || name == "" || (sub == "check" && *adminURL != "") {
		fs.Usage()
		return exitUsage
	}
	name = strings.ToUpper(name)
	env := config.NewEnv(environ)
	declared := config.LoadSQLTargets(env)
	schedulerURL := config.DatabaseURL(env)
	if err := env.Err(); err != nil {
		return configError(stderr, err)
	}
	decl, ok := declared[name]
	if !ok {
		fmt.Fprintf(stderr, "scheduler: SCHEDULER_SQL_TARGET_%s is not set: declare the target first\n", name)
		return exitUsage
	}
	ctx, cancel := context.WithTimeout(ctx, sqlTargetTimeout)
	defer cancel()
	target, err := newSQLTarget(name, decl.URL, schedulerURL)
	if err != nil {
		fmt.Fprintf(stderr, "scheduler: %v\n", err)
		return exitUsage
	}
	if sub == "init" {
		if err := initMarkers(ctx, target, decl.URL, *adminURL); err != nil {
			fmt.Fprintf(stderr, "scheduler: SQL target %s: %v\n", name, err)
			return exitFailure
		}
		fmt.Fprintf(stdout, "SQL target %s: schema %s is ready for login %s's markers\n", name, targets.MarkerSchema(target.Login()), target.Login())
	}
	if err := target.Check(ctx); err != nil {
		fmt.Fprintf(stderr, "scheduler: %v\n", err)
		return exitFailure
	}
	fmt.Fprintf(stdout, "SQL target %s: login %s cannot reach the scheduler; SQL jobs may name it\n", name, target.Login())
	return exitOK
}

// newSQLTarget is the target as a replica builds it (without a replica's instance id).
func newSQLTarget(name, targetURL, schedulerURL string) (*targets.SQLTarget, error) {
	opts := store.Options{InstanceID: "cli", LeaseTimeout: config.LeaseTimeoutDefault}
	conn, err := store.ConnConfig(targetURL, opts)
	if err != nil {
		return nil, fmt.Errorf("SCHEDULER_SQL_TARGET_%s: %w", name, err)
	}
	sched, err := pgx.ParseConfig(schedulerURL)
	if err != nil {
		return nil, fmt.Errorf("DATABASE_URL: %w", err)
	}
	return targets.NewSQLTarget(targets.SQLTargetConfig{Name: name, Conn: conn, InstanceID: "cli", SchedulerLogin: sched.User}), nil
}

// initMarkers creates the login's marker schema as the target's login, or as the
// administrator of adminURL, which must be a URL of the same database.
func initMarkers(ctx context.Context, target *targets.SQLTarget, targetURL, adminURL string) error {
	u := targetURL
	if adminURL != "" {
		u = adminURL
	}
	conn, err := pgx.Connect(ctx, u)
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if adminURL != "" {
		want, err := pgx.ParseConfig(targetURL)
		if err != nil {
			return err
		}
		var db string
		if err := conn.QueryRow(ctx, `SELECT current_database()`).Scan(&db); err != nil {
			return err
		}
		if db != want.Database {
			return errors.New("--admin-url names database " + db + ", the target's is " + want.Database + ": give a URL of the target's database")
		}
	}
	return targets.InitMarkers(ctx, conn, target.Login())
}
