package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/schedulerhq/scheduler/client"
	"github.com/schedulerhq/scheduler/internal/namespace"
)

// Namespaces: scheduler namespace create|set|list (package client routes the job commands by -n).

// commaList is a list flag's value for the API: "" is the empty list.
func commaList(s string) *[]string {
	out := []string{}
	for part := range strings.SplitSeq(s, ",") {
		if part = strings.TrimSpace(part); part != "" {
			out = append(out, part)
		}
	}
	return &out
}

// namespacePutFlags is namespace create (a namespace that exists is refused, so a typo in a
// script cannot reset another team's quotas) and namespace set (one that does not exist is
// refused; the quotas not named keep their value). Both read the namespace first, since
// PUT replaces every quota; an admin setting the same namespace at the same moment could
// see the other's change undone, which the audit log shows.
func namespacePutFlags(create bool) func(fs *flag.FlagSet) func(context.Context, *cli, []string) int {
	return func(fs *flag.FlagSet) func(context.Context, *cli, []string) int {
		maxJobs := fs.Int("max-jobs", 0, "at most this many runtime jobs in it (0: no bound)")
		maxCalls := fs.Int("max-concurrent-calls", 0, "at most this many of its HTTP calls at once (0: no bound)")
		minInterval := fs.Duration("min-interval", 0, "refuse schedules whose slots come closer than this, such as 5m (0: no bound)")
		sqlTargets := fs.String("sql-targets", "", `comma-separated SQL targets its jobs may name, such as APP ("": none)`)
		httpAllow := fs.String("http-allow", "", `comma-separated CIDRs and host names its jobs may call although private, inside SCHEDULER_HTTP_ALLOW ("": none)`)
		envSecrets := fs.String("env-secrets", "", `comma-separated SCHEDULER_SECRET_<NAME> names its jobs may name ("": none)`)
		reason := fs.String("reason", "", "why (kept in the audit log)")
		return func(ctx context.Context, x *cli, args []string) int {
			ns := args[0]
			if !namespace.Valid(ns) {
				fmt.Fprintf(x.stderr, "scheduler: %q is not a namespace name: want 1 to 63 lower-case letters, digits and '-', starting and ending with a letter or digit (e.g. billing)\n", ns)
				return exitUsage
			}
			if *maxJobs < 0 || *maxCalls < 0 || *minInterval < 0 {
				fmt.Fprintln(x.stderr, "scheduler: a quota is 0 (no bound) or more")
				return exitUsage
			}
			cur, err := x.c.GetNamespace(ctx, ns)
			var e *client.Problem
			notFound := errors.As(err, &e) && e.Status == http.StatusNotFound
			switch {
			case create && err == nil:
				fmt.Fprintf(x.stderr, "scheduler: namespace %s exists already; scheduler namespace set %s changes its quotas\n", ns, ns)
				return exitFailure
			case !create && notFound:
				fmt.Fprintf(x.stderr, "scheduler: there is no namespace %s; scheduler namespace create %s makes it\n", ns, ns)
				return exitUsage
			case errors.As(err, &e) && e.Status == http.StatusForbidden:
				// Not an admin (an admin reads every namespace): PUT refuses it in the
				// words that say who may.
			case err != nil && !notFound:
				return x.fail(ctx, err)
			}
			req := client.NamespaceRequest{MaxJobs: cur.MaxJobs, MaxConcurrentCalls: cur.MaxConcurrentCalls, MinInterval: cur.MinInterval, Reason: *reason}
			fs.Visit(func(f *flag.Flag) {
				switch f.Name {
				case "max-jobs":
					req.MaxJobs = bound(*maxJobs)
				case "max-concurrent-calls":
					req.MaxConcurrentCalls = bound(*maxCalls)
				case "sql-targets":
					req.SQLTargets = commaList(*sqlTargets)
				case "http-allow":
					req.HTTPAllow = commaList(*httpAllow)
				case "env-secrets":
					req.EnvSecrets = commaList(*envSecrets)
				case "min-interval":
					req.MinInterval = nil
					if *minInterval > 0 {
						s := minInterval.String()
						req.MinInterval = &s
					}
				}
			})
			v, created, err := x.c.PutNamespace(ctx, ns, req)
			if err != nil {
				return x.fail(ctx, err)
			}
			if x.json {
				return x.printJSON(v)
			}
			done := "set"
			if created {
				done = "created"
			}
			fmt.Fprintf(x.stdout, "namespace %s %s: %s\n", ns, done, quotas(v))
			if created {
				fmt.Fprintf(x.stdout, "give a team access with: scheduler token create --name %s-team --role editor -n %s\n", ns, ns)
			}
			return exitOK
		}
	}
}

// bound is a quota flag's value for the API: 0 means no bound (null).
func bound(n int) *int {
	if n == 0 {
		return nil
	}
	return &n
}

// quotas says a namespace's quotas in a line.
func quotas(v *client.Namespace) string {
	unbounded := func(p *int) string {
		if p == nil {
			return "no bound"
		}
		return strconv.Itoa(*p)
	}
	interval := "no bound"
	if v.MinInterval != nil {
		interval = shortText(*v.MinInterval)
	}
	return fmt.Sprintf("max jobs %s, max concurrent calls %s, min interval %s",
		unbounded(v.MaxJobs), unbounded(v.MaxConcurrentCalls), interval)
}

// shortText writes a duration of the API ("5m0s") the short way ("5m").
func shortText(d string) string {
	p, err := time.ParseDuration(d)
	if err != nil {
		return d
	}
	s := p.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

func namespaceListFlags(*flag.FlagSet) func(context.Context, *cli, []string) int {
	return func(ctx context.Context, x *cli, _ []string) int {
		namespaces, err := x.c.ListNamespaces(ctx)
		if err != nil {
			return x.fail(ctx, err)
		}
		if x.json {
			return x.printJSON(client.Namespaces{Namespaces: namespaces})
		}
		if len(namespaces) == 0 {
			fmt.Fprintln(x.stdout, "no namespace this token may read")
			return exitOK
		}
		dash := func(p *int) string {
			if p == nil {
				return "-"
			}
			return strconv.Itoa(*p)
		}
		tw := x.table()
		fmt.Fprintln(tw, "NAME\tJOBS\tSECRETS\tMAX JOBS\tMAX CONCURRENT CALLS\tMIN INTERVAL")
		for _, n := range namespaces {
			interval := "-"
			if n.MinInterval != nil {
				interval = shortText(*n.MinInterval)
			}
			fmt.Fprintf(tw, "%s\t%d\t%d\t%s\t%s\t%s\n", n.Name, n.Jobs, n.Secrets, dash(n.MaxJobs), dash(n.MaxConcurrentCalls), interval)
		}
		tw.Flush()
		return exitOK
	}
}
