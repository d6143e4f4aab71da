package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strconv"

	"github.com/schedulerhq/scheduler/internal/config"
	"github.com/schedulerhq/scheduler/internal/store"
)

const migrateUsage = `Usage:
  scheduler migrate up             apply every pending migration
  scheduler migrate down [N]       revert the last N migrations (default 1)
  scheduler migrate down --all     revert every migration
  scheduler migrate version        print the applied version and the binary's version

Replicas migrate at start too ("serve"); running this by hand is for operators.
Several processes migrating at once are safe: migrations take a PostgreSQL advisory lock.
`

func migrateCmd(ctx context.Context, args, environ []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("migrate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, migrateUsage) }
	all := fs.Bool("all", false, "with down: revert every migration")
	if len(args) == 0 {
		fs.Usage()
		return exitUsage
	}
	sub := args[0]
	if err := fs.Parse(args[1:]); err != nil {
		if err == flag.ErrHelp {
			return exitOK
		}
		return exitUsage
	}
	if sub == "-h" || sub == "--help" || sub == "help" {
		fmt.Fprint(stdout, migrateUsage)
		return exitOK
	}
	env := config.NewEnv(environ)
	url := config.DatabaseURL(env)
	if err := env.Err(); err != nil {
		return configError(stderr, err)
	}
	mg, err := store.NewMigrator(url)
	if err != nil {
		fmt.Fprintf(stderr, "scheduler: %v\n", err)
		return exitFailure
	}
	defer mg.Close()

	switch sub {
	case "up":
		err = mg.Up()
	case "down":
		steps := 1
		if *all {
			steps = 0
		} else if fs.NArg() > 0 {
			steps, err = strconv.Atoi(fs.Arg(0))
			if err != nil || steps < 1 {
				fmt.Fprintf(stderr, "scheduler: migrate down: %q is not a positive number of steps (use --all for every migration)\n", fs.Arg(0))
				return exitUsage
			}
		}
		err = mg.Down(steps)
	case "version":
	default:
		fmt.Fprintf(stderr, "scheduler: unknown migrate command %q\n\n%s", sub, migrateUsage)
		return exitUsage
	}
	if err != nil {
		fmt.Fprintf(stderr, "scheduler: %v\n", err)
		return exitFailure
	}
	v, dirty, err := mg.Version()
	if err != nil {
		fmt.Fprintf(stderr, "scheduler: read schema version: %v\n", err)
		return exitFailure
	}
	fmt.Fprintf(stdout, "schema version %d (binary expects %d)", v, store.SchemaVersion())
	if dirty {
		fmt.Fprint(stdout, "; DIRTY: the last migration failed half-way: repair the schema by hand, set schema_migrations.dirty = false, then run `scheduler migrate up`")
	}
	fmt.Fprintln(stdout)
	return exitOK
}
