package main

import (
	"cmp"
	"context"
	"flag"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/schedulerhq/scheduler/client"
	"github.com/schedulerhq/scheduler/internal/namespace"
	"github.com/schedulerhq/scheduler/internal/runtimejob"
)

// The job commands: jobs, job.

// jobsPageSize is how many jobs `scheduler jobs` asks for a request: at 10 000 jobs the
// unpaged list is a 12 MB answer, and a page lets the table start at once.
const jobsPageSize = 200

func jobsFlags(fs *flag.FlagSet) func(context.Context, *cli, []string) int {
	every := fs.Bool("A", false, "every namespace's jobs, each with its namespace (admin)")
	status := fs.String("status", "", "only the jobs failing, running, paused or disabled")
	return func(ctx context.Context, x *cli, _ []string) int {
		var all []client.Job // -o json: one {"jobs": [...]} of every page
		// Outside namespace default each row says its namespace, so a table pasted into a
		// ticket, or read with SCHEDULER_NAMESPACE set and forgotten, says where it is from.
		nsColumn := x.ns != namespace.Default || *every
		tw := x.table()
		if !x.json {
			if nsColumn {
				fmt.Fprint(tw, "NAMESPACE\t")
			}
			fmt.Fprintln(tw, "NAME\tSCHEDULE\tPAUSED\tLAST STATUS\tNEXT RUN")
		}
		o := client.ListJobsOptions{Limit: jobsPageSize, Status: *status, AllNamespaces: *every}
		for {
			page, err := x.c.ListJobs(ctx, o)
			if err != nil {
				return x.fail(ctx, err)
			}
			if len(all) == 0 && len(page.Jobs) == 0 && !x.json {
				fmt.Fprintln(x.stdout, noJobs(x.ns, *every, *status))
				return exitOK
			}
			all = append(all, page.Jobs...)
			if !x.json {
				for _, j := range page.Jobs {
					last := "-"
					if j.LastRun != nil {
						last = j.LastRun.Status
					}
					if nsColumn {
						fmt.Fprintf(tw, "%s\t", j.Namespace)
					}
					fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", j.Name, j.ScheduleText, yesNo(j.Paused), last, x.nextRun(&j))
				}
				tw.Flush() // print as it goes; each page aligns its own columns
			}
			if page.NextCursor == nil || *page.NextCursor == "" {
				break
			}
			o.Cursor = *page.NextCursor
		}
		if x.json {
			if all == nil {
				all = []client.Job{}
			}
			return x.printJSON(map[string]any{"jobs": all})
		}
		return exitOK
	}
}

// noJobs says that a list came back empty: of what, and how to define some.
func noJobs(ns string, every bool, status string) string {
	switch {
	case every && status != "":
		return "no job of any namespace is " + status
	case every:
		return "no jobs in any namespace yet"
	case status != "":
		return fmt.Sprintf("no job of namespace %s is %s", ns, status)
	}
	return fmt.Sprintf("no jobs in namespace %s yet; scheduler apply -f FILE -n %s defines some", ns, ns)
}

func (x *cli) nextRun(j *client.Job) string {
	switch {
	case !j.Enabled:
		return "disabled"
	case j.Finished:
		return "finished"
	case j.Paused:
		return "paused"
	case j.NextRunAt == nil:
		return "-"
	}
	return x.when(j.NextRunAt)
}

func jobFlags(fs *flag.FlagSet) func(context.Context, *cli, []string) int {
	limit := fs.Int("limit", 10, "how many recent runs to show")
	return func(ctx context.Context, x *cli, args []string) int {
		j, err := x.c.GetJob(ctx, args[0])
		if err != nil {
			return x.fail(ctx, err)
		}
		runs, err := x.c.ListRuns(ctx, args[0], client.ListRunsOptions{Limit: *limit})
		if err != nil {
			return x.fail(ctx, err)
		}
		if x.json {
			return x.printJSON(map[string]any{"job": j, "runs": runs.Runs})
		}
		state := "active"
		switch {
		case !j.Enabled:
			state = "disabled"
		case j.Finished:
			state = "finished"
		case j.Paused:
			state = "paused"
		}
		tw := x.table()
		fmt.Fprintf(tw, "Job:\t%s\n", j.Name)
		fmt.Fprintf(tw, "Namespace:\t%s\n", j.Namespace)
		fmt.Fprintf(tw, "State:\t%s\n", state)
		lines := definitionLines(j)
		what := 0 // Kind, Target and SQL target come first: what the job is
		for what < len(lines) && slices.Contains([]string{"Kind", "Target", "SQL target"}, lines[what][0]) {
			what++
		}
		printLines(tw, lines[:what])
		rest := lines[what:]
		if j.Schedule == "" { // a job with only parents: its schedule_text says so
			fmt.Fprintf(tw, "Schedule:\t%s\n", j.ScheduleText)
		} else {
			fmt.Fprintf(tw, "Schedule:\t%s (%s)\n", j.ScheduleText, j.Schedule)
		}
		if len(j.After) > 0 {
			fmt.Fprintf(tw, "After:\t%s\n", strings.Join(j.After, ", "))
		}
		if len(j.Children) > 0 {
			fmt.Fprintf(tw, "Runs before:\t%s\n", strings.Join(j.Children, ", "))
		}
		fmt.Fprintf(tw, "Time zone:\t%s\n", j.TimeZone)
		fmt.Fprintf(tw, "Timeout:\t%s\n", j.Timeout)
		fmt.Fprintf(tw, "Catch-up:\t%s\n", j.Catchup)
		fmt.Fprintf(tw, "Min gap:\t%s\n", cmp.Or(j.MinGap, "none"))
		printLines(tw, rest)
		tw.Flush()
		fmt.Fprintln(x.stdout, "\nNext runs:")
		switch {
		case len(j.NextRuns) == 0 && j.Schedule == "" && len(j.After) > 0:
			fmt.Fprintln(x.stdout, "  none of its own: it runs after its parents succeed")
		case len(j.NextRuns) == 0:
			fmt.Fprintf(x.stdout, "  none (%s)\n", state)
		}
		marks := map[time.Time]string{}
		for _, m := range j.NextRunsDST {
			marks[m.At] = " (" + m.Change + ": " + m.Note + ")"
		}
		for _, t := range j.NextRuns {
			fmt.Fprintf(x.stdout, "  %s%s\n", x.when(&t), marks[t])
		}
		if len(j.Warnings) > 0 {
			fmt.Fprintln(x.stdout, "\nClock changes:")
			for _, w := range j.Warnings {
				fmt.Fprintf(x.stdout, "  %s\n", w)
			}
		}
		fmt.Fprintln(x.stdout, "\nRecent runs:")
		x.runTable(runs.Runs)
		return exitOK
	}
}

// printLines writes "Label:  value" lines; a line without a label continues the one above.
func printLines(w io.Writer, lines [][2]string) {
	for _, l := range lines {
		if l[0] != "" {
			l[0] += ":"
		}
		fmt.Fprintf(w, "%s\t%s\n", l[0], l[1])
	}
}

// definitionLines say the rest of a job's definition in words, a label and a value each:
// what it runs and where, how, who is told; for a built-in job, what the view has. `job`
// prints the first lines (what the job is) before the schedule, so their order matters.
func definitionLines(j *client.Job) [][2]string {
	var d runtimejob.Definition
	if hasDefinition(j) {
		d, _ = runtimejob.Decode(j.Definition)
	}
	var out jobLines
	out.add("Kind", j.Kind)
	out.add("Target", j.Target)
	out.where(d)
	out.how(j, d)
	if d.HTTP != nil {
		out.httpAuth(d.HTTP)
	}
	out.notify(j)
	out.about(j)
	return out
}

// jobLines are definitionLines' label-value pairs. A step adds only what the job has, so a
// line is never printed with an empty value.
type jobLines [][2]string

func (l *jobLines) add(label, value string) {
	if value != "" {
		*l = append(*l, [2]string{label, value})
	}
}

// where says what a SQL, River or NATS job reaches, field by field: the Target line above
// is the one-line summary made for lists.
func (l *jobLines) where(d runtimejob.Definition) {
	if d.SQL != nil {
		l.add("SQL target", d.SQL.Target)
	}
	if r := d.River; r != nil {
		l.add("SQL target", r.Target)
		l.add("River job", fmt.Sprintf("kind %s, queue %s, args %s", r.Kind, cmp.Or(r.Queue, "default"), cmp.Or(string(r.Args), "{}")))
		if r.Unique {
			l.add("Unique", "no job while one of the same kind, args and queue waits or runs")
		}
	}
	if n := d.NATS; n != nil {
		l.add("NATS server", cmp.Or(n.URL, "the URL in secret "+n.URLSecret))
		l.add("NATS subject", n.Subject+" (Nats-Msg-Id: the slot's key)")
	}
}

// how says how the job runs: overlap, concurrency, jitter, retries and pausing. A runtime
// job without retries says so: a missing line would not tell the reader it tries once.
func (l *jobLines) how(j *client.Job, d runtimejob.Definition) {
	l.add("Overlap", cmp.Or(j.Overlap, d.Overlap))
	if d.MaxConcurrent > 0 {
		l.add("Max concurrent", strconv.Itoa(d.MaxConcurrent))
	}
	l.add("Jitter", d.Jitter)
	switch r := d.Retry; {
	case r == nil || r.MaxAttempts <= 1:
		if j.Runtime() {
			l.add("Retries", "none (one attempt)")
		}
	default:
		l.add("Retries", fmt.Sprintf("up to %d attempts, backoff %s doubling to %s", r.MaxAttempts, cmp.Or(r.InitialBackoff, "default"), cmp.Or(r.MaxBackoff, "default")))
	}
	if d.PauseAfterFailures > 0 {
		l.add("Pause after", fmt.Sprintf("%d failures in a row", d.PauseAfterFailures))
	}
}

// httpAuth says how an HTTP job proves itself, naming the secrets and never their values,
// and "none" when it does not, so an unauthenticated call is visible; then its completion.
func (l *jobLines) httpAuth(h *runtimejob.HTTPTarget) {
	var auth []string
	if a := h.Auth; a != nil {
		if a.BearerSecret != "" {
			auth = append(auth, "bearer token from secret "+a.BearerSecret)
		}
		if a.Header != "" {
			auth = append(auth, "header "+a.Header+" from secret "+a.HeaderSecret)
		}
		if a.OIDC != nil {
			auth = append(auth, "OIDC token signed by the scheduler for audience "+a.OIDC.Audience)
		}
	}
	if h.SigningSecret != "" {
		auth = append(auth, "body signed with secret "+h.SigningSecret)
	}
	if len(auth) == 0 {
		auth = []string{"none"}
	}
	l.add("Auth", strings.Join(auth, "; "))
	if h.Completion == runtimejob.CompletionCallback {
		l.add("Completion", "callback (heartbeat timeout "+cmp.Or(h.HeartbeatTimeout, "5m")+")")
	}
}

// notify says who is told, one rule a line: a runtime job's rules are in its definition, a
// built-in job's in the view (SCHEDULER_JOB_<NAME>_NOTIFY_*). "nobody" is said outright.
func (l *jobLines) notify(j *client.Job) {
	rules := notifyRules(j.Definition)
	if !j.Runtime() {
		rules = notifyRules([]byte(`{"notify":` + cmp.Or(string(j.Notify), "null") + `}`))
	}
	for i, r := range rules {
		label := ""
		if i == 0 {
			label = "Notify"
		}
		*l = append(*l, [2]string{label, r})
	}
	if len(rules) == 0 {
		l.add("Notify", "nobody (no notify rules)")
	}
}

// about says what describes the job rather than how it runs: labels (sorted, so the output
// is stable), description, version, and why a stored definition no longer passes the check.
func (l *jobLines) about(j *client.Job) {
	if len(j.Labels) > 0 {
		keys := slices.Sorted(maps.Keys(j.Labels))
		pairs := make([]string, len(keys))
		for i, k := range keys {
			pairs[i] = k + "=" + j.Labels[k]
		}
		l.add("Labels", strings.Join(pairs, ", "))
	}
	if j.Description != nil {
		l.add("Description", oneLine(*j.Description, 100))
	}
	if j.Version != nil {
		l.add("Version", strconv.FormatInt(*j.Version, 10))
	}
	l.add("Definition error", j.DefinitionError)
}
