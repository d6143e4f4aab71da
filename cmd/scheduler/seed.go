package main

import (
	"context"
	"flag"
	"fmt"
	"io"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/schedulerhq/scheduler/internal/config"
	"github.com/schedulerhq/scheduler/internal/seed"
)

const seedUsage = `Usage: scheduler seed [--members N] [--groups N] [--leads N] [--appointments N]

Loads demo data for every job: members across tenants (some with a pending plan change due,
some whose membership has ended), groups spread over many time zones, leads (some
abandoned), and organizations in several time zones with appointments around now (some due
for each appointment job). Idempotent: running it again with the same sizes adds nothing; larger sizes add
the difference. Applies pending migrations first. Needs DATABASE_URL.

Flags:
`

func seedCmd(ctx context.Context, args, environ []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("seed", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, seedUsage); fs.PrintDefaults() }
	members := fs.Int("members", 1000, "members, across tenants")
	groups := fs.Int("groups", 200, "groups (daily rounds), spread over time zones")
	leads := fs.Int("leads", 200, "form leads")
	appointments := fs.Int("appointments", 200, "appointments around now, in organizations in several time zones")
	if err := fs.Parse(args); err != nil {
		if err == flag.ErrHelp {
			return exitOK
		}
		return exitUsage
	}
	if *members < 0 || *groups < 0 || *leads < 0 || *appointments < 0 {
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
	// Demo data is written with the seed package's own SQL, on a plain pool: the store
	// offers named queries only.
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		fmt.Fprintf(stderr, "scheduler: seed: %v\n", err)
		return exitFailure
	}
	defer pool.Close()

	steps := []struct {
		what string
		n    int
		fn   func(context.Context, *pgxpool.Pool, int) (int, error)
	}{
		{"members", *members, seed.Members},
		{"groups", *groups, seed.Rounds},
		{"leads", *leads, seed.Leads},
		{"appointments", *appointments, seed.Appointments},
	}
	for _, step := range steps {
		added, err := step.fn(ctx, pool, step.n)
		if err != nil {
			fmt.Fprintf(stderr, "scheduler: seed %s: %v\n", step.what, err)
			return exitFailure
		}
		fmt.Fprintf(stdout, "seeded %s: %d new (of %d wanted)\n", step.what, added, step.n)
	}
	return exitOK
}
