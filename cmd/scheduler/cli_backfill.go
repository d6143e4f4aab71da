package main

import (
	"context"
	"flag"
	"fmt"
	"time"

	"github.com/schedulerhq/scheduler/client"
)

// The commands that run slots again: rerun (one run's slot) and backfill (a job's slots in a
// window), each under the slot's own time and Idempotency-Key.

func rerunFlags(fs *flag.FlagSet) func(context.Context, *cli, []string) int {
	reason := fs.String("reason", "", "why (kept in the audit log)")
	return func(ctx context.Context, x *cli, args []string) int {
		id, ok := x.runID(args[0])
		if !ok {
			return exitUsage
		}
		run, err := x.c.RerunRun(ctx, id, *reason)
		if err != nil {
			return x.fail(ctx, err)
		}
		if x.json {
			return x.printJSON(run)
		}
		fmt.Fprintf(x.stdout, "queued run %d: the slot of %s again, with its Idempotency-Key (scheduler run %d shows it)\n",
			run.ID, run.ScheduledAt.UTC().Format(time.RFC3339), run.ID)
		return exitOK
	}
}

func backfillFlags(fs *flag.FlagSet) func(context.Context, *cli, []string) int {
	since := fs.String("since", "", "the first slot time to look at (RFC 3339, e.g. 2026-11-24T00:00:00Z)")
	until := fs.String("until", "", "the last slot time to look at (RFC 3339); default now")
	only := fs.String("only", "missed", "which slots: missed, failed or all")
	dryRun := fs.Bool("dry-run", false, "list the slots that would run; run nothing")
	reason := fs.String("reason", "", "why (kept in the audit log)")
	return func(ctx context.Context, x *cli, args []string) int {
		if *since == "" {
			fmt.Fprintln(x.stderr, "scheduler backfill: --since is required (RFC 3339, e.g. 2026-11-24T00:00:00Z)")
			return exitUsage
		}
		end := *until
		if end == "" {
			end = time.Now().UTC().Format(time.RFC3339)
		}
		ans, err := x.c.Backfill(ctx, args[0], client.BackfillRequest{Since: *since, Until: end, Only: *only, DryRun: *dryRun, Reason: *reason})
		if err != nil {
			return x.fail(ctx, err)
		}
		if x.json {
			return x.printJSON(ans)
		}
		switch {
		case len(ans.Slots) == 0:
			fmt.Fprintf(x.stdout, "no %s slot of %s%s between %s and %s: nothing to run\n", *only, args[0], x.inNamespace(), *since, end)
			return exitOK
		case ans.ID == 0: // a dry run's
			fmt.Fprintf(x.stdout, "would run %d slots of %s%s, oldest first:\n", len(ans.Slots), args[0], x.inNamespace())
		default:
			fmt.Fprintf(x.stdout, "backfill %d runs %d slots of %s%s, one at a time, oldest first (scheduler: GET /v1/backfills/%d):\n",
				ans.ID, len(ans.Slots), args[0], x.inNamespace(), ans.ID)
		}
		for _, s := range ans.Slots {
			fmt.Fprintf(x.stdout, "  %s\n", s.UTC().Format(time.RFC3339))
		}
		return exitOK
	}
}
