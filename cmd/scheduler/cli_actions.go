package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"time"

	"github.com/schedulerhq/scheduler/client"
)

// The action commands: cancel, pause, resume, step-down; and status.

func cancelFlags(fs *flag.FlagSet) func(context.Context, *cli, []string) int {
	reason := fs.String("reason", "", "why (kept in the audit log)")
	return func(ctx context.Context, x *cli, args []string) int {
		id, ok := x.runID(args[0])
		if !ok {
			return exitUsage
		}
		run, err := x.c.CancelRun(ctx, id, *reason)
		if err != nil {
			return x.fail(ctx, err)
		}
		if x.json {
			return x.printJSON(run)
		}
		if !run.Finished() { // 202: the leader cancels it
			fmt.Fprintf(x.stdout, "run %d is running; the leader cancels it now\n", id)
		} else {
			fmt.Fprintf(x.stdout, "run %d cancelled before it started\n", id)
		}
		return exitOK
	}
}

func pauseFlags(pause bool) func(fs *flag.FlagSet) func(context.Context, *cli, []string) int {
	return func(fs *flag.FlagSet) func(context.Context, *cli, []string) int {
		reason := fs.String("reason", "", "why (kept in the audit log)")
		return func(ctx context.Context, x *cli, args []string) int {
			done := "resumed: scheduled runs start again from the next slot"
			if pause {
				done = "paused: no scheduled or catch-up run until resumed (trigger still works)"
			}
			change := x.c.ResumeJob
			if pause {
				change = x.c.PauseJob
			}
			j, err := change(ctx, args[0], *reason)
			if err != nil {
				return x.fail(ctx, err)
			}
			if x.json {
				return x.printJSON(j)
			}
			fmt.Fprintf(x.stdout, "%s%s %s\n", args[0], x.inNamespace(), done)
			return exitOK
		}
	}
}

func stepDownFlags(fs *flag.FlagSet) func(context.Context, *cli, []string) int {
	reason := fs.String("reason", "", "why (kept in the audit log)")
	return func(ctx context.Context, x *cli, _ []string) int {
		l, err := x.c.StepDown(ctx, *reason)
		if err != nil {
			return x.fail(ctx, err)
		}
		if x.json {
			return x.printJSON(l)
		}
		fmt.Fprintf(x.stdout, "asked %s (epoch %d) to step down; a waiting replica takes over (a lone replica is elected again) and it stays up as a follower\n", l.InstanceID, l.Epoch)
		return exitOK
	}
}

func drainFlags(fs *flag.FlagSet) func(context.Context, *cli, []string) int {
	reason := fs.String("reason", "", "why (kept in the audit log)")
	return func(ctx context.Context, x *cli, args []string) int {
		d, err := x.c.Drain(ctx, args[0], *reason)
		if err != nil {
			return x.fail(ctx, err)
		}
		if x.json {
			return x.printJSON(d)
		}
		fmt.Fprintf(x.stdout, "asked %s to drain: within a heartbeat it releases its partitions (its running jobs finish first, "+
			"up to the drain timeout), steps down if it leads, and takes none until it restarts\n", d.InstanceID)
		return exitOK
	}
}

func statusFlags(*flag.FlagSet) func(context.Context, *cli, []string) int {
	return func(ctx context.Context, x *cli, _ []string) int {
		l, errLeader := x.c.Leader(ctx)
		var e *client.Problem
		if errLeader != nil && !(errors.As(errLeader, &e) && e.Slug() == "no-leader") {
			return x.fail(ctx, errLeader)
		}
		instances, err := x.c.Instances(ctx)
		if err != nil {
			return x.fail(ctx, err)
		}
		if errLeader != nil {
			l = nil
		}
		if x.json {
			return x.printJSON(map[string]any{"leader": l, "instances": instances})
		}
		if l == nil {
			fmt.Fprintln(x.stdout, "Leader: none elected yet (no job runs until one is)")
		} else {
			fmt.Fprintf(x.stdout, "Leader: %s, epoch %d, since %s\n", l.InstanceID, l.Epoch, x.when(&l.Since))
		}
		fmt.Fprintln(x.stdout)
		// A replica heartbeats every 2 s; one not seen for goneAfter more than the freshest
		// (the clock of the database, not this machine's) is gone: killed, or cut off.
		var freshest time.Time
		for _, in := range instances {
			if in.LastSeenAt.After(freshest) {
				freshest = in.LastSeenAt
			}
		}
		gone := 0
		tw := x.table()
		fmt.Fprintln(tw, "INSTANCE\tSTATE\tHOST\tVERSION\tADDRESS\tLAST SEEN")
		for _, in := range instances {
			state := "follower"
			switch {
			case freshest.Sub(in.LastSeenAt) > goneAfter:
				state = "gone"
				gone++
			case in.IsLeader:
				state = "leader"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", in.InstanceID, state, in.Host, in.Version, in.HTTPAddr, x.when(&in.LastSeenAt))
		}
		tw.Flush()
		if gone > 0 {
			fmt.Fprintf(x.stdout, "\ngone: not seen for over %s (killed, or cut off from the database); the leader forgets a replica about 20s after its last heartbeat, and it leaves this list\n", goneAfter)
		}
		return exitOK
	}
}

// goneAfter is how long behind the freshest replica's heartbeat status calls a replica gone:
// two default leases (SCHEDULER_LEASE_TIMEOUT 5s), five default heartbeats.
const goneAfter = 10 * time.Second
