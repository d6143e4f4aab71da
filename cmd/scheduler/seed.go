package main

import (
	"context"
	"flag"
	"fmt"
	"io"

	"github.com/schedulerhq/scheduler/internal/config"
	"github.com/schedulerhq/scheduler/internal/seed"
	"github.com/schedulerhq/scheduler/internal/store"
)

const seedUsage = `Usage: scheduler seed [--groups N]

Loads demo data for every job: groups spread over many time zones. Idempotent: running it
again adds nothing. Applies pending migrations first. Needs DATABASE_URL.

Flags:
`

func seedCmd(ctx context.Context, args, environ []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("seed", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, seedUsage); fs.PrintDefaults() }
	groups := fs.Int("groups", 200, "groups (daily rounds), spread over time zones")
	if err := fs.Parse(args); err != nil {
		if err == flag.ErrHelp {
			return exitOK
		}
		return exitUsage
	}
	if *groups < 0 {
		fmt.Fprintln(stderr, "scheduler: seed: sizes must be 0 or more")
		return exitUsage
	}
	env := config.NewEnv(environ)
	url := config.DatabaseURL(env)
	if err := env.Err(); err != nil {
		return configError(stderr, err)
	}
	if err := migrateOnce(url); err != nil {
		fmt.Fprintf(stderr, "scheduler: seed: %v\n", err)
		return exitFailure
	}
	db, err := store.Open(ctx, url, store.Options{InstanceID: "seed"})
	if err != nil {
		fmt.Fprintf(stderr, "scheduler: seed: %v\n", err)
		return exitFailure
	}
	defer db.Close()

	n, err := seed.Rounds(ctx, db.Pool, *groups)
	if err != nil {
		fmt.Fprintf(stderr, "scheduler: seed groups: %v\n", err)
		return exitFailure
	}
	fmt.Fprintf(stdout, "seeded: %d new groups\n", n)
	return exitOK
}
