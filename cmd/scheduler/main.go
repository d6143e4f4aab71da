// Command scheduler runs an application's periodic jobs on exactly one elected replica.
//
//	scheduler serve             run a replica (HTTP API + leader election + job schedule)
//	scheduler migrate up|down|version
//	scheduler seed              load demo data
//	scheduler jobs|job|trigger|runs|run|cancel|pause|resume|status|step-down|apply|get|delete
//	scheduler whoami|namespace|token|secret
//	                            the client commands, against a replica's HTTP API
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"

	"github.com/schedulerhq/scheduler/internal/config"
)

// Exit codes: 2 means "you asked for something invalid" (usage, configuration), so scripts
// and orchestrators can tell a misconfiguration from a runtime failure (1).
const (
	exitOK      = 0
	exitFailure = 1
	exitUsage   = 2
)

const usage = `scheduler runs an application's periodic jobs on one elected replica.

Usage:
  scheduler serve                 run a replica: HTTP API, leader election, job schedule
  scheduler migrate up            apply pending migrations
  scheduler migrate down [N|--all] revert N migrations (default 1)
  scheduler migrate version       print the applied schema version
  scheduler seed [flags]          load demo data (idempotent)
  scheduler sql-target init|check NAME
                                  prepare or check a SQL target (SCHEDULER_SQL_TARGET_NAME)
  scheduler secret-key rotate     re-seal the stored secrets with SCHEDULER_SECRET_KEY
  scheduler partitions set N      change SCHEDULER_PARTITIONS, every replica stopped
  scheduler healthcheck           exit 0 when this host's replica answers /readyz 200
  scheduler version [-o json]     print the version, commit and build date

Run "scheduler <command> --help" for a command's flags. The server side's configuration
comes from the environment; see README.md ("Configuration"). DATABASE_URL is required there.
`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Environ(), os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

func run(ctx context.Context, args, environ []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage+clientHelp())
		return exitUsage
	}
	cmd, rest := args[0], args[1:]
	// A database command beside the client's "partitions" (the API's view of them).
	if cmd == "partitions" && len(rest) > 0 && rest[0] == "set" {
		return partitionsSetCmd(ctx, rest[1:], environ, stdout, stderr)
	}
	switch cmd {
	case "serve":
		return serve(ctx, rest, environ, stdout, stderr)
	case "migrate":
		return migrateCmd(ctx, rest, environ, stdout, stderr)
	case "seed":
		return seedCmd(ctx, rest, environ, stdout, stderr)
	case "sql-target":
		return sqlTargetCmd(ctx, rest, environ, stdout, stderr)
	case "secret-key":
		return secretKeyCmd(ctx, rest, environ, stdout, stderr)
	case "healthcheck":
		return healthcheck(environ, stderr)
	case "version", "--version":
		return versionCmd(rest, stdout, stderr)
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage+clientHelp())
		return exitOK
	default:
		if c, ok := findClientCommand(cmd); ok {
			return runClient(ctx, c, rest, environ, stdout, stderr)
		}
		if slices.Contains(clientGroups, cmd) {
			return runGroup(ctx, cmd, rest, environ, stdout, stderr)
		}
		fmt.Fprintf(stderr, "scheduler: unknown command %q\n\n%s", cmd, usage+clientHelp())
		return exitUsage
	}
}

// configError prints every invalid variable, one per line, and returns the usage exit code.
func configError(stderr io.Writer, err error) int {
	for _, line := range strings.Split(err.Error(), "\n") {
		fmt.Fprintf(stderr, "scheduler: %s\n", line)
	}
	var cfgErr *config.Error
	if !errors.As(err, &cfgErr) {
		return exitFailure
	}
	return exitUsage
}
