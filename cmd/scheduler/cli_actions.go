package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net/http"

	wire "github.com/schedulerhq/scheduler/client"
)

// The action commands: cancel, pause, resume, step-down; and status.

func reasonBody(reason string) any {
	if reason == "" {
		return nil
	}
	return map[string]string{"reason": reason}
}

func cancelFlags(fs *flag.FlagSet) func(context.Context, *cli, []string) int {
	reason := fs.String("reason", "", "why (kept in the audit log)")
	return func(ctx context.Context, x *cli, args []string) int {
		id, ok := x.runID(args[0])
		if !ok {
			return exitUsage
		}
		var raw json.RawMessage
		status, err := x.c.do(ctx, "POST", "/v1/runs/"+id+"/cancel", nil, reasonBody(*reason), nil, &raw)
		if err != nil {
			return x.fail(ctx, err)
		}
		if x.json {
			return x.printJSON(raw)
		}
		if status == http.StatusAccepted {
			fmt.Fprintf(x.stdout, "run %s is running; the leader cancels it now\n", id)
		} else {
			fmt.Fprintf(x.stdout, "run %s cancelled before it started\n", id)
		}
		return exitOK
	}
}

func pauseFlags(pause bool) func(fs *flag.FlagSet) func(context.Context, *cli, []string) int {
	return func(fs *flag.FlagSet) func(context.Context, *cli, []string) int {
		reason := fs.String("reason", "", "why (kept in the audit log)")
		return func(ctx context.Context, x *cli, args []string) int {
			action, done := "resume", "resumed: scheduled runs start again from the next slot"
			if pause {
				action, done = "pause", "paused: no scheduled or catch-up run until resumed (trigger still works)"
			}
			var raw json.RawMessage
			if _, err := x.c.do(ctx, "POST", jobPath(x.ns, args[0])+"/"+action, nil, reasonBody(*reason), nil, &raw); err != nil {
				return x.fail(ctx, err)
			}
			if x.json {
				return x.printJSON(raw)
			}
			fmt.Fprintf(x.stdout, "%s%s %s\n", args[0], x.inNamespace(), done)
			return exitOK
		}
	}
}

func stepDownFlags(fs *flag.FlagSet) func(context.Context, *cli, []string) int {
	reason := fs.String("reason", "", "why (kept in the audit log)")
	return func(ctx context.Context, x *cli, _ []string) int {
		var raw json.RawMessage
		if _, err := x.c.do(ctx, "POST", "/v1/leader/step-down", nil, reasonBody(*reason), nil, &raw); err != nil {
			return x.fail(ctx, err)
		}
		if x.json {
			return x.printJSON(raw)
		}
		var l wire.Leader
		_ = json.Unmarshal(raw, &l)
		fmt.Fprintf(x.stdout, "asked %s (epoch %d) to step down; a waiting replica takes over (a lone replica is elected again) and it stays up as a follower\n", l.InstanceID, l.Epoch)
		return exitOK
	}
}

func statusFlags(*flag.FlagSet) func(context.Context, *cli, []string) int {
	return func(ctx context.Context, x *cli, _ []string) int {
		var rawLeader, rawInstances json.RawMessage
		_, errLeader := x.c.do(ctx, "GET", "/v1/leader", nil, nil, nil, &rawLeader)
		var e *apiError
		if errLeader != nil && !(errors.As(errLeader, &e) && e.slug() == "no-leader") {
			return x.fail(ctx, errLeader)
		}
		if _, err := x.c.do(ctx, "GET", "/v1/instances", nil, nil, nil, &rawInstances); err != nil {
			return x.fail(ctx, err)
		}
		if x.json {
			var instances struct {
				Instances json.RawMessage `json:"instances"`
			}
			_ = json.Unmarshal(rawInstances, &instances)
			if errLeader != nil {
				rawLeader = json.RawMessage("null")
			}
			b, _ := json.Marshal(map[string]json.RawMessage{"leader": rawLeader, "instances": instances.Instances})
			return x.printJSON(b)
		}
		if errLeader != nil {
			fmt.Fprintln(x.stdout, "Leader: none elected yet (no job runs until one is)")
		} else {
			var l wire.Leader
			_ = json.Unmarshal(rawLeader, &l)
			fmt.Fprintf(x.stdout, "Leader: %s, epoch %d, since %s\n", l.InstanceID, l.Epoch, x.when(&l.Since))
		}
		var list struct{ Instances []wire.Instance }
		_ = json.Unmarshal(rawInstances, &list)
		fmt.Fprintln(x.stdout)
		tw := x.table()
		fmt.Fprintln(tw, "INSTANCE\tROLE\tHOST\tVERSION\tADDRESS\tLAST HEARTBEAT")
		for _, in := range list.Instances {
			role := "follower"
			if in.IsLeader {
				role = "leader"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", in.InstanceID, role, in.Host, in.Version, in.HTTPAddr, x.when(&in.LastSeenAt))
		}
		tw.Flush()
		return exitOK
	}
}
