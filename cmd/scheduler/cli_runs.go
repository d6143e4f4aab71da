package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/schedulerhq/scheduler/client"
)

// The run commands: runs, run, trigger.

func runsFlags(fs *flag.FlagSet) func(context.Context, *cli, []string) int {
	status := fs.String("status", "", "only runs with this status (queued, running, succeeded, failed, skipped, timed_out, abandoned, cancelled, missed)")
	trigger := fs.String("trigger", "", "only runs with this trigger (schedule, manual, catch-up, recovery)")
	limit := fs.Int("limit", 20, "how many runs (1-500)")
	return func(ctx context.Context, x *cli, args []string) int {
		page, err := x.c.ListRuns(ctx, args[0], client.ListRunsOptions{Limit: *limit, Status: *status, Trigger: *trigger})
		if err != nil {
			return x.fail(ctx, err)
		}
		if x.json {
			return x.printJSON(page)
		}
		x.runTable(page.Runs)
		return exitOK
	}
}

func (x *cli) runTable(runs []client.Run) {
	if len(runs) == 0 {
		fmt.Fprintln(x.stdout, "  no runs")
		return
	}
	tw := x.table()
	fmt.Fprintln(tw, "ID\tSTATUS\tTRIGGER\tSLOT/CREATED\tDURATION\tREASON/ERROR")
	for _, r := range runs {
		at := r.ScheduledAt
		if at == nil {
			at = &r.CreatedAt
		}
		note := ""
		if r.Error != nil {
			note = *r.Error
		} else if r.Reason != nil {
			note = *r.Reason
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\n", r.ID, r.Status, r.Trigger, x.when(at), durationText(r.DurationMS), oneLine(note, 60))
	}
	tw.Flush()
}

func runFlags(*flag.FlagSet) func(context.Context, *cli, []string) int {
	return func(ctx context.Context, x *cli, args []string) int {
		id, ok := x.runID(args[0])
		if !ok {
			return exitUsage
		}
		r, err := x.c.GetRun(ctx, id)
		if err != nil {
			return x.fail(ctx, err)
		}
		if x.json {
			return x.printJSON(r)
		}
		x.printRun(r)
		return exitOK
	}
}

func (x *cli) runID(arg string) (int64, bool) {
	n, err := strconv.ParseInt(arg, 10, 64)
	if err != nil || n <= 0 {
		fmt.Fprintf(x.stderr, "scheduler: a run id is a positive integer, not %q\n", arg)
		return 0, false
	}
	return n, true
}

func (x *cli) printRun(r *client.Run) {
	tw := x.table()
	row := func(k, v string) { fmt.Fprintf(tw, "%s:\t%s\n", k, v) }
	row("Run", strconv.FormatInt(r.ID, 10))
	row("Job", r.Job)
	row("Namespace", r.Namespace)
	row("Status", r.Status+map[bool]string{true: " (cancel requested)"}[r.CancelRequested])
	row("Trigger", r.Trigger)
	row("Slot", x.when(r.ScheduledAt))
	row("Created", x.when(&r.CreatedAt))
	row("Started", x.when(r.StartedAt))
	row("Finished", x.when(r.FinishedAt))
	row("Duration", durationText(r.DurationMS))
	row("Replica", deref(r.InstanceID))
	if r.Epoch != nil {
		row("Epoch", strconv.FormatInt(*r.Epoch, 10))
	}
	row("Reason", deref(r.Reason))
	if r.RecoversRunID != nil {
		row("Recovers", "run "+strconv.FormatInt(*r.RecoversRunID, 10))
	}
	row("Params", string(r.Params))
	row("Stats", string(r.Stats))
	if r.Error != nil {
		row("Error", oneLine(*r.Error, 200))
	}
	tw.Flush()
}

func triggerFlags(fs *flag.FlagSet) func(context.Context, *cli, []string) int {
	wait := fs.Duration("wait", 0, "wait up to this long for the run to end, such as 5m; exit 0 only if it succeeded")
	dryRun := fs.Bool("dry-run", false, "count what the run would change, and change nothing")
	reason := fs.String("reason", "", "why (kept with the run and in the audit log)")
	key := fs.String("idempotency-key", "", "a UUID v4; retrying with the same key never queues a second run")
	return func(ctx context.Context, x *cli, args []string) int {
		if *wait < 0 {
			fmt.Fprintln(x.stderr, "scheduler trigger: --wait must not be negative")
			return exitUsage
		}
		t, err := x.c.TriggerRun(ctx, args[0], client.TriggerOptions{Params: map[string]any{"dry_run": *dryRun},
			Reason: *reason, IdempotencyKey: *key, Wait: min(*wait, serverMaxWait)})
		if e := (*client.Problem)(nil); errors.As(err, &e) && e.Slug() == "run-active" {
			// Not one line of problem: the caller must learn which run is in the way and how on.
			fmt.Fprintf(x.stderr, "scheduler trigger: nothing queued: run %d of %s is queued or running with other params than these, which it would not use.\n"+
				"  wait for it:  scheduler run %d, then trigger again\n  or cancel it: scheduler cancel %d\n", e.ActiveRunID, args[0], e.ActiveRunID, e.ActiveRunID)
			return exitRefused
		}
		if err != nil {
			return x.fail(ctx, err)
		}
		r := &t.Run
		if *wait > 0 && !r.Finished() {
			deadline := time.Now().Add(*wait - serverMaxWait)
			for !r.Finished() && time.Now().Before(deadline) {
				select {
				case <-ctx.Done():
					return exitFailure
				case <-time.After(pollEvery):
				}
				if r, err = x.c.GetRun(ctx, r.ID); err != nil {
					return x.fail(ctx, err)
				}
			}
		}
		if x.json {
			x.printJSON(r)
		} else {
			switch {
			case *wait > 0 && r.Finished():
				fmt.Fprintf(x.stdout, "run %d of %s %s after %s\n", r.ID, r.Job, r.Status, durationText(r.DurationMS))
				if r.Error != nil {
					fmt.Fprintf(x.stdout, "error: %s\n", oneLine(*r.Error, 200))
				}
			case *wait > 0:
				fmt.Fprintf(x.stdout, "run %d of %s still %s after %s; follow it with: scheduler run %d\n", r.ID, r.Job, r.Status, *wait, r.ID)
			case t.Status == http.StatusOK:
				fmt.Fprintf(x.stdout, "run %d of %s was already %s; no second run queued\n", r.ID, r.Job, r.Status)
			default:
				fmt.Fprintf(x.stdout, "run %d of %s queued; follow it with: scheduler run %d\n", r.ID, r.Job, r.ID)
			}
		}
		if *wait > 0 && r.Status != "succeeded" {
			return exitFailure
		}
		return exitOK
	}
}
