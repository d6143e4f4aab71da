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
	"os"
	"slices"
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
	stdin  io.Reader // apply -f -
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
	{"apply", "-f FILE", "create or update the runtime jobs a YAML file defines (--prune deletes the others)", 0, applyFlags},
	{"get", "NAME", "a runtime job's definition, as YAML that apply takes back", 1, getFlags},
	{"delete", "NAME", "delete a runtime job (its runs stay in the history)", 1, deleteFlags},
}

// outputFormats are the -o values a command takes, its default first. get prints a
// definition, whose readable form is the YAML that apply reads.
func outputFormats(cmd string) []string {
	if cmd == "get" {
		return []string{"yaml", "json"}
	}
	return []string{"table", "json"}
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
	return runClientWith(ctx, cmd, args, environ, os.Stdin, stdout, stderr)
}

// runClientWith is runClient reading stdin from a given reader (tests).
func runClientWith(ctx context.Context, cmd clientCommand, args, environ []string, stdin io.Reader, stdout, stderr io.Writer) int {
	env := config.NewEnv(environ)
	fs := flag.NewFlagSet(cmd.name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	base := fs.String("url", env.String("SCHEDULER_URL", urlDefault), "the replica's base URL (SCHEDULER_URL)")
	formats := outputFormats(cmd.name)
	output := fs.String("o", formats[0], "output: "+strings.Join(formats, " or "))
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
	if !slices.Contains(formats, *output) {
		fmt.Fprintf(stderr, "scheduler %s: -o must be %s, not %q\n", cmd.name, strings.Join(formats, " or "), *output)
		return exitUsage
	}
	u, err := url.Parse(*base)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		fmt.Fprintf(stderr, "scheduler %s: --url must be an http(s) URL such as %s, not %q\n", cmd.name, urlDefault, *base)
		return exitUsage
	}
	x := &cli{
		c:     &client{base: strings.TrimRight(*base, "/"), token: env.String("SCHEDULER_API_TOKEN", ""), http: &http.Client{Timeout: serverMaxWait + time.Minute}},
		stdin: stdin, stdout: stdout, stderr: stderr, json: *output == "json", now: time.Now,
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
