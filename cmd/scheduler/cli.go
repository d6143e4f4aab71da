package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/schedulerhq/scheduler/api"
	"github.com/schedulerhq/scheduler/internal/config"
)

// The client commands talk to a replica's /v1 API; they need no database.

const (
	// exitRefused: the server could not be reached, or refused the token (401, 403).
	exitRefused = 3
	urlDefault  = "http://127.0.0.1:8080"
	// serverMaxWait is the API's cap on ?wait; a longer --wait goes on by polling the run.
	serverMaxWait = 5 * time.Minute
	pollEvery     = 500 * time.Millisecond
)

// cli is one client command's context: where to send requests, where to write, and how.
type cli struct {
	c      *client
	stdout io.Writer
	stderr io.Writer
	json   bool
	now    func() time.Time
}

// clientCommand describes one subcommand: its usage line, what it does, how many
// positional arguments it takes, and its own flags.
type clientCommand struct {
	name, args, summary string
	nargs               int
	flags               func(fs *flag.FlagSet) func(ctx context.Context, x *cli, args []string) int
}

var clientCommands = []clientCommand{
	{"jobs", "", "list the jobs: schedule, paused, last status, next run", 0, jobsFlags},
	{"job", "NAME", "one job: its settings, next 5 runs and recent history", 1, jobFlags},
	{"trigger", "NAME", "run a job now; with --wait, until it ends (exit 1 unless it succeeded)", 1, triggerFlags},
	{"runs", "NAME", "a job's runs, newest first", 1, runsFlags},
	{"run", "ID", "one run: status, times, replica, counts, error", 1, runFlags},
	{"cancel", "ID", "cancel a queued or running run", 1, cancelFlags},
	{"pause", "NAME", "stop a job's scheduled runs (Run now still works)", 1, pauseFlags(true)},
	{"resume", "NAME", "start a paused job's scheduled runs again", 1, pauseFlags(false)},
	{"status", "", "the leader, its epoch, and every replica", 0, statusFlags},
	{"step-down", "", "make the leader resign now; a follower takes over", 0, stepDownFlags},
}

const clientUsage = `
Client commands (talk to a replica's HTTP API at --url or SCHEDULER_URL, default
http://127.0.0.1:8080, with the token in SCHEDULER_API_TOKEN):
`

func clientHelp() string {
	var b strings.Builder
	b.WriteString(clientUsage)
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	for _, c := range clientCommands {
		fmt.Fprintf(tw, "  scheduler %s %s\t%s\n", c.name, c.args, c.summary)
	}
	tw.Flush()
	b.WriteString("\nExit codes: 0 ok (with --wait: the run succeeded), 1 the run failed, timed out or was\ncancelled, or the request failed, 2 usage, 3 the server could not be reached or refused the token.\n")
	return b.String()
}

func findClientCommand(name string) (clientCommand, bool) {
	i := slices.IndexFunc(clientCommands, func(c clientCommand) bool { return c.name == name })
	if i < 0 {
		return clientCommand{}, false
	}
	return clientCommands[i], true
}

// runClient parses a client command's flags (before or after its arguments) and runs it.
func runClient(ctx context.Context, cmd clientCommand, args, environ []string, stdout, stderr io.Writer) int {
	env := config.NewEnv(environ)
	fs := flag.NewFlagSet(cmd.name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	base := fs.String("url", env.String("SCHEDULER_URL", urlDefault), "the replica's base URL (SCHEDULER_URL)")
	output := fs.String("o", "table", "output: table or json")
	runCmd := cmd.flags(fs)
	usage := func(w io.Writer) {
		fs.SetOutput(w)
		fmt.Fprintf(w, "Usage: scheduler %s %s [flags]\n\n%s.\n\nFlags:\n", cmd.name, cmd.args, upperFirst(cmd.summary))
		fs.PrintDefaults()
		fmt.Fprint(w, "\nThe token comes from SCHEDULER_API_TOKEN. Exit codes: 0 ok, 1 failed, 2 usage, 3 unreachable or refused.\n")
	}
	fs.Usage = func() {} // printed below, on stdout for --help and on stderr for a mistake
	positional, err := parseInterleaved(fs, args)
	if errors.Is(err, flag.ErrHelp) {
		usage(stdout)
		return exitOK
	}
	if err != nil {
		usage(stderr)
		return exitUsage
	}
	if len(positional) != cmd.nargs {
		fmt.Fprintf(stderr, "scheduler %s: expected %s, got %d argument(s)\n", cmd.name, orNone(cmd.args), len(positional))
		usage(stderr)
		return exitUsage
	}
	if *output != "table" && *output != "json" {
		fmt.Fprintf(stderr, "scheduler %s: -o must be table or json, not %q\n", cmd.name, *output)
		return exitUsage
	}
	u, err := url.Parse(*base)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		fmt.Fprintf(stderr, "scheduler %s: --url must be an http(s) URL such as %s, not %q\n", cmd.name, urlDefault, *base)
		return exitUsage
	}
	x := &cli{
		c:      &client{base: strings.TrimRight(*base, "/"), token: env.String("SCHEDULER_API_TOKEN", ""), http: &http.Client{Timeout: serverMaxWait + time.Minute}},
		stdout: stdout, stderr: stderr, json: *output == "json", now: time.Now,
	}
	return runCmd(ctx, x, positional)
}

// parseInterleaved lets flags come after the arguments too ("trigger plan-change --wait 5m"),
// which the flag package alone stops at.
func parseInterleaved(fs *flag.FlagSet, args []string) ([]string, error) {
	var positional []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		if fs.NArg() == 0 {
			return positional, nil
		}
		positional = append(positional, fs.Arg(0))
		args = fs.Args()[1:]
	}
}

// fail reports an API error on one line and returns its exit code. An unknown job is a
// usage error that lists the jobs there are.
func (x *cli) fail(ctx context.Context, err error) int {
	var e *apiError
	if !errors.As(err, &e) {
		fmt.Fprintf(x.stderr, "scheduler: %v\n", err)
		return exitFailure
	}
	fmt.Fprintf(x.stderr, "scheduler: %s\n", e.Error())
	switch {
	case e.Status == 0 || e.Status == http.StatusUnauthorized || e.Status == http.StatusForbidden:
		return exitRefused
	case e.Status == http.StatusNotFound && e.slug() == "job-not-found":
		var list struct{ Jobs []api.Job }
		if _, err := x.c.do(ctx, "GET", "/v1/jobs", nil, nil, nil, &list); err == nil {
			names := make([]string, len(list.Jobs))
			for i, j := range list.Jobs {
				names[i] = j.Name
			}
			fmt.Fprintf(x.stderr, "scheduler: the jobs are: %s\n", strings.Join(names, ", "))
		}
		return exitUsage
	case e.Status == http.StatusBadRequest || e.Status == http.StatusNotFound:
		return exitUsage
	default:
		return exitFailure
	}
}

// printJSON writes an answer as indented JSON, for scripts.
func (x *cli) printJSON(raw json.RawMessage) int {
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		fmt.Fprintf(x.stderr, "scheduler: the answer is not JSON: %v\n", err)
		return exitFailure
	}
	b, _ := json.MarshalIndent(v, "", "  ")
	fmt.Fprintln(x.stdout, string(b))
	return exitOK
}

func (x *cli) table() *tabwriter.Writer { return tabwriter.NewWriter(x.stdout, 0, 0, 2, ' ', 0) }

// ---- jobs, job ------------------------------------------------------------------------------

func jobsFlags(*flag.FlagSet) func(context.Context, *cli, []string) int {
	return func(ctx context.Context, x *cli, _ []string) int {
		var raw json.RawMessage
		if _, err := x.c.do(ctx, "GET", "/v1/jobs", nil, nil, nil, &raw); err != nil {
			return x.fail(ctx, err)
		}
		if x.json {
			return x.printJSON(raw)
		}
		var list struct{ Jobs []api.Job }
		_ = json.Unmarshal(raw, &list)
		tw := x.table()
		fmt.Fprintln(tw, "NAME\tSCHEDULE\tPAUSED\tLAST STATUS\tNEXT RUN")
		for _, j := range list.Jobs {
			last := "-"
			if j.LastRun != nil {
				last = j.LastRun.Status
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", j.Name, j.ScheduleText, yesNo(j.Paused), last, x.nextRun(&j))
		}
		tw.Flush()
		return exitOK
	}
}

func (x *cli) nextRun(j *api.Job) string {
	switch {
	case !j.Enabled:
		return "disabled"
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
		path := "/v1/jobs/" + url.PathEscape(args[0])
		var rawJob, rawRuns json.RawMessage
		if _, err := x.c.do(ctx, "GET", path, nil, nil, nil, &rawJob); err != nil {
			return x.fail(ctx, err)
		}
		if _, err := x.c.do(ctx, "GET", path+"/runs", url.Values{"limit": {strconv.Itoa(*limit)}}, nil, nil, &rawRuns); err != nil {
			return x.fail(ctx, err)
		}
		if x.json {
			var runs struct {
				Runs json.RawMessage `json:"runs"`
			}
			_ = json.Unmarshal(rawRuns, &runs)
			b, _ := json.Marshal(map[string]json.RawMessage{"job": rawJob, "runs": runs.Runs})
			return x.printJSON(b)
		}
		var j api.Job
		var runs struct{ Runs []api.Run }
		_ = json.Unmarshal(rawJob, &j)
		_ = json.Unmarshal(rawRuns, &runs)
		state := "active"
		if !j.Enabled {
			state = "disabled"
		} else if j.Paused {
			state = "paused"
		}
		tw := x.table()
		fmt.Fprintf(tw, "Job:\t%s\n", j.Name)
		fmt.Fprintf(tw, "State:\t%s\n", state)
		fmt.Fprintf(tw, "Schedule:\t%s (%s)\n", j.ScheduleText, j.Schedule)
		fmt.Fprintf(tw, "Time zone:\t%s\n", j.TimeZone)
		fmt.Fprintf(tw, "Timeout:\t%s\n", j.Timeout)
		fmt.Fprintf(tw, "Catch-up:\t%s\n", j.Catchup)
		fmt.Fprintf(tw, "Min gap:\t%s\n", j.MinGap)
		tw.Flush()
		fmt.Fprintln(x.stdout, "\nNext runs:")
		if len(j.NextRuns) == 0 {
			fmt.Fprintf(x.stdout, "  none (%s)\n", state)
		}
		for _, t := range j.NextRuns {
			fmt.Fprintf(x.stdout, "  %s\n", x.when(&t))
		}
		fmt.Fprintln(x.stdout, "\nRecent runs:")
		x.runTable(runs.Runs)
		return exitOK
	}
}

// ---- runs, run --------------------------------------------------------------------------------

func runsFlags(fs *flag.FlagSet) func(context.Context, *cli, []string) int {
	status := fs.String("status", "", "only runs with this status (queued, running, succeeded, failed, skipped, timed_out, abandoned, cancelled, missed)")
	trigger := fs.String("trigger", "", "only runs with this trigger (schedule, manual, catch-up, recovery)")
	limit := fs.Int("limit", 20, "how many runs (1-500)")
	return func(ctx context.Context, x *cli, args []string) int {
		q := url.Values{"limit": {strconv.Itoa(*limit)}}
		if *status != "" {
			q.Set("status", *status)
		}
		if *trigger != "" {
			q.Set("trigger", *trigger)
		}
		var raw json.RawMessage
		if _, err := x.c.do(ctx, "GET", "/v1/jobs/"+url.PathEscape(args[0])+"/runs", q, nil, nil, &raw); err != nil {
			return x.fail(ctx, err)
		}
		if x.json {
			return x.printJSON(raw)
		}
		var page struct{ Runs []api.Run }
		_ = json.Unmarshal(raw, &page)
		x.runTable(page.Runs)
		return exitOK
	}
}

func (x *cli) runTable(runs []api.Run) {
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
		var raw json.RawMessage
		if _, err := x.c.do(ctx, "GET", "/v1/runs/"+id, nil, nil, nil, &raw); err != nil {
			return x.fail(ctx, err)
		}
		if x.json {
			return x.printJSON(raw)
		}
		var r api.Run
		_ = json.Unmarshal(raw, &r)
		x.printRun(&r)
		return exitOK
	}
}

func (x *cli) runID(arg string) (string, bool) {
	if n, err := strconv.ParseInt(arg, 10, 64); err != nil || n <= 0 {
		fmt.Fprintf(x.stderr, "scheduler: a run id is a positive integer, not %q\n", arg)
		return "", false
	}
	return arg, true
}

func (x *cli) printRun(r *api.Run) {
	tw := x.table()
	row := func(k, v string) { fmt.Fprintf(tw, "%s:\t%s\n", k, v) }
	row("Run", strconv.FormatInt(r.ID, 10))
	row("Job", r.Job)
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

// ---- trigger ----------------------------------------------------------------------------------

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
		body := map[string]any{"params": map[string]any{"dry_run": *dryRun}}
		if *reason != "" {
			body["reason"] = *reason
		}
		q := url.Values{}
		if *wait > 0 {
			q.Set("wait", min(*wait, serverMaxWait).String())
		}
		var h map[string]string
		if *key != "" {
			h = map[string]string{"Idempotency-Key": *key}
		}
		var raw json.RawMessage
		status, err := x.c.do(ctx, "POST", "/v1/jobs/"+url.PathEscape(args[0])+"/runs", q, body, h, &raw)
		if err != nil {
			return x.fail(ctx, err)
		}
		var r api.Run
		_ = json.Unmarshal(raw, &r)
		if *wait > 0 && !finished(&r) {
			deadline := time.Now().Add(*wait - serverMaxWait)
			for !finished(&r) && time.Now().Before(deadline) {
				select {
				case <-ctx.Done():
					return exitFailure
				case <-time.After(pollEvery):
				}
				if _, err := x.c.do(ctx, "GET", "/v1/runs/"+strconv.FormatInt(r.ID, 10), nil, nil, nil, &raw); err != nil {
					return x.fail(ctx, err)
				}
				_ = json.Unmarshal(raw, &r)
			}
		}
		if x.json {
			x.printJSON(raw)
		} else {
			switch {
			case *wait > 0 && finished(&r):
				fmt.Fprintf(x.stdout, "run %d of %s %s after %s\n", r.ID, r.Job, r.Status, durationText(r.DurationMS))
				if r.Error != nil {
					fmt.Fprintf(x.stdout, "error: %s\n", oneLine(*r.Error, 200))
				}
			case *wait > 0:
				fmt.Fprintf(x.stdout, "run %d of %s still %s after %s; follow it with: scheduler run %d\n", r.ID, r.Job, r.Status, *wait, r.ID)
			case status == http.StatusOK:
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

// ---- actions: cancel, pause, resume, step-down --------------------------------------------

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
			if _, err := x.c.do(ctx, "POST", "/v1/jobs/"+url.PathEscape(args[0])+"/"+action, nil, reasonBody(*reason), nil, &raw); err != nil {
				return x.fail(ctx, err)
			}
			if x.json {
				return x.printJSON(raw)
			}
			fmt.Fprintf(x.stdout, "%s %s\n", args[0], done)
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
		var l api.Leader
		_ = json.Unmarshal(raw, &l)
		fmt.Fprintf(x.stdout, "asked %s (epoch %d) to step down; a waiting replica takes over (a lone replica is elected again) and it stays up as a follower\n", l.InstanceID, l.Epoch)
		return exitOK
	}
}

// ---- status -------------------------------------------------------------------------------

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
			var l api.Leader
			_ = json.Unmarshal(rawLeader, &l)
			fmt.Fprintf(x.stdout, "Leader: %s, epoch %d, since %s\n", l.InstanceID, l.Epoch, x.when(&l.Since))
		}
		var list struct{ Instances []api.Instance }
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

// ---- formatting ---------------------------------------------------------------------------

// when shows a time in UTC with how far it is from now: "2026-01-31 02:00:00Z (in 3h5m)".
func (x *cli) when(t *time.Time) string {
	if t == nil {
		return "-"
	}
	d := t.Sub(x.now()).Round(time.Second)
	rel := "now"
	switch {
	case d >= time.Second:
		rel = "in " + shortDuration(d)
	case d <= -time.Second:
		rel = shortDuration(-d) + " ago"
	}
	return t.UTC().Format("2006-01-02 15:04:05Z") + " (" + rel + ")"
}

func shortDuration(d time.Duration) string {
	switch {
	case d >= 48*time.Hour:
		return fmt.Sprintf("%dd", d/(24*time.Hour))
	case d >= time.Hour:
		return strings.TrimSuffix(d.Truncate(time.Minute).String(), "0s")
	default:
		return d.String()
	}
}

func durationText(ms *int64) string {
	if ms == nil {
		return "-"
	}
	return (time.Duration(*ms) * time.Millisecond).String()
}

func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}

func deref(s *string) string {
	if s == nil {
		return "-"
	}
	return *s
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

func orNone(args string) string {
	if args == "" {
		return "no arguments"
	}
	return args
}

func upperFirst(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}
