package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"

	"github.com/schedulerhq/scheduler/client"
)

// scheduler get NAME and scheduler delete NAME: one runtime job's definition, or its end.

func getFlags(*flag.FlagSet) func(context.Context, *cli, []string) int {
	return func(ctx context.Context, x *cli, args []string) int {
		v, err := x.c.GetJob(ctx, args[0])
		if err != nil {
			return x.fail(ctx, err)
		}
		if !v.Runtime() || !hasDefinition(v) {
			fmt.Fprintf(x.stderr, "scheduler: %s is a built-in job; it has no definition to get (see scheduler job %s)\n", args[0], args[0])
			return exitFailure
		}
		if x.json {
			var b bytes.Buffer
			if err := json.Indent(&b, v.Definition, "", "  "); err != nil {
				fmt.Fprintf(x.stderr, "scheduler: the answer is not JSON: %v\n", err)
				return exitFailure
			}
			fmt.Fprintln(x.stdout, b.String())
			return exitOK
		}
		out, err := definitionsYAML(v.Definition)
		if err != nil {
			fmt.Fprintf(x.stderr, "scheduler: the definition is not JSON: %v\n", err)
			return exitFailure
		}
		_, _ = x.stdout.Write(out)
		return exitOK
	}
}

func deleteFlags(fs *flag.FlagSet) func(context.Context, *cli, []string) int {
	reason := fs.String("reason", "", "why (kept in the audit log)")
	force := fs.Bool("force", false, "delete a job that other jobs name in after (needs --reason); they then wait for a job of this name")
	return func(ctx context.Context, x *cli, args []string) int {
		if err := x.c.DeleteJob(ctx, args[0], client.WriteJobOptions{Reason: *reason, Force: *force}); err != nil {
			if refused(err) {
				return x.fail(ctx, err)
			}
			// A job that is not there, or a built-in one, is a failure, not a usage
			// error: a script deleting a job twice should see it.
			fmt.Fprintf(x.stderr, "scheduler: %v\n", err)
			return exitFailure
		}
		if x.json {
			return x.printJSON(map[string]any{"name": args[0], "namespace": x.ns, "deleted": true})
		}
		fmt.Fprintf(x.stdout, "deleted %s%s\n", args[0], x.inNamespace())
		return exitOK
	}
}
