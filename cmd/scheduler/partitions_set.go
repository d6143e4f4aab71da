package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/schedulerhq/scheduler/internal/config"
	"github.com/schedulerhq/scheduler/internal/store"
)

const partitionsSetUsage = `Usage: scheduler partitions set N [--live 30s]

Changes the cluster's number of partitions (SCHEDULER_PARTITIONS, 1..1024), which is fixed
when the first replica starts. Stop every replica first: it refuses while any replica's
instance row was refreshed within --live. It re-hashes every runtime job onto N partitions,
with its queued and running runs. Then start every replica with SCHEDULER_PARTITIONS=N (a
replica with another count refuses to start). Needs DATABASE_URL; applies no migration.

Flags:
`

// partitionsSetCmd is "scheduler partitions set N": the documented way to change
// SCHEDULER_PARTITIONS (docs/operations.md, "Partitions"), run against the database.
func partitionsSetCmd(ctx context.Context, args, environ []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("partitions set", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, partitionsSetUsage); fs.PrintDefaults() }
	live := fs.Duration("live", 30*time.Second, "a replica whose instance row is younger than this counts as running")
	if len(args) > 0 && (args[0] == "-h" || args[0] == "--help") {
		fmt.Fprint(stdout, partitionsSetUsage)
		return exitOK
	}
	if len(args) == 0 {
		fs.Usage()
		return exitUsage
	}
	n, err := strconv.Atoi(args[0])
	if perr := fs.Parse(args[1:]); perr != nil {
		return exitUsage
	}
	if err != nil || n < 1 || n > 1024 {
		fmt.Fprintf(stderr, "scheduler: partitions set: %q is not a number of partitions from 1 to 1024, e.g. 64\n", args[0])
		return exitUsage
	}
	env := config.NewEnv(environ)
	url := config.DatabaseURL(env)
	if err := env.Err(); err != nil {
		return configError(stderr, err)
	}
	db, err := store.Open(ctx, url, store.Options{InstanceID: "partitions-set", LeaseTimeout: config.LeaseTimeoutDefault})
	if err != nil {
		fmt.Fprintf(stderr, "scheduler: %v\n", err)
		return exitFailure
	}
	defer db.Close()
	if err := db.SetPartitions(ctx, n, *live); err != nil {
		fmt.Fprintf(stderr, "scheduler: partitions set: %v\n", err)
		if errors.Is(err, store.ErrReplicasLive) {
			return exitUsage
		}
		return exitFailure
	}
	fmt.Fprintf(stdout, "the cluster has %d partitions; start every replica with SCHEDULER_PARTITIONS=%d\n", n, n)
	return exitOK
}
