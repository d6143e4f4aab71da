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

	"github.com/schedulerhq/scheduler/client"
	"github.com/schedulerhq/scheduler/internal/config"
	"github.com/schedulerhq/scheduler/internal/namespace"
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
	c      *client.Client
	stdin  io.Reader // apply -f -
	stdout io.Writer
	stderr io.Writer
	json   bool
	now    func() time.Time
	// ns is the namespace the job and secret commands act in (-n, SCHEDULER_NAMESPACE,
	// else default); nsGiven says -n was on the command line.
	ns      string
	nsGiven bool
	// reason (apply's and delete's --reason) goes with every definition change, in the
	// X-Reason header, to the change's audit row.
	reason string
}

// clientCommand describes one subcommand: its usage line, what it does, how many
// positional arguments it takes, whether it acts in a namespace (-n), and its own flags. A
// name of two words ("token create") is a command of a group (clientGroups).
type clientCommand struct {
	name, args, summary string
	nargs               int
	namespaced          bool
	flags               func(fs *flag.FlagSet) func(ctx context.Context, x *cli, args []string) int
}

var clientCommands = []clientCommand{
	{"jobs", "", "list the jobs: schedule, paused, last status, next run (-A: every namespace's, admin; --status failing)", 0, true, jobsFlags},
	{"job", "NAME", "one job: its settings, next 5 runs and recent history", 1, true, jobFlags},
	{"trigger", "NAME", "run a job now; with --wait, until it ends (exit 1 unless it succeeded)", 1, true, triggerFlags},
	{"runs", "NAME", "a job's runs, newest first", 1, true, runsFlags},
	{"run", "ID", "one run: status, times, replica, counts, error", 1, true, runFlags},
	{"cancel", "ID", "cancel a queued or running run", 1, true, cancelFlags},
	{"rerun", "ID", "run a run's slot again, with its time and Idempotency-Key", 1, true, rerunFlags},
	{"backfill", "NAME", "run a job's missed (or failed, or all) slots of a window again, oldest first", 1, true, backfillFlags},
	{"slots", "NAME", "a job's slots of a window (--since, --until; default the last 24 hours) and what became of each", 1, true, slotsFlags},
	{"notifications", "NAME", "a job's notify rules, the messages they sent (newest first) and the events still waiting", 1, true, notificationsFlags},
	{"pause", "NAME", "stop a job's scheduled runs (Run now still works)", 1, true, pauseFlags(true)},
	{"resume", "NAME", "start a paused job's scheduled runs again", 1, true, pauseFlags(false)},
	{"status", "", "the leader, its epoch, and every replica", 0, false, statusFlags},
	{"partitions", "", "who leads what: each partition's holder and jobs, and how many each replica holds", 0, false, partitionsFlags},
	{"step-down", "", "make the leader resign now; a follower takes over", 0, false, stepDownFlags},
	{"drain", "INSTANCE", "make a replica give up its partitions (and leadership) and take none until it restarts (admin)", 1, false, drainFlags},
	{"apply", "-f FILE", "create or update a YAML file's runtime jobs in their namespaces (--prune deletes the others there)", 0, true, applyFlags},
	{"get", "NAME", "a runtime job's definition, as YAML that apply takes back", 1, true, getFlags},
	{"delete", "NAME", "delete a runtime job (its runs stay in the history)", 1, true, deleteFlags},
	{"whoami", "", "the token in use: its name and what it may do where", 0, false, whoamiFlags},
	{"namespace create", "NS", "create a namespace, with its quotas (admin)", 1, false, namespacePutFlags(true)},
	{"namespace set", "NS", "change a namespace's quotas; those not named stay as they are (admin)", 1, false, namespacePutFlags(false)},
	{"namespace list", "", "the namespaces this token may read: jobs, secrets, quotas", 0, false, namespaceListFlags},
	{"token create", "", "make an API token for one namespace (or an admin token); its value is shown once (admin)", 0, true, tokenCreateFlags},
	{"token list", "", "the tokens made with token create: role, namespace, expiry, revocation (admin)", 0, false, tokenListFlags},
	{"token revoke", "ID", "revoke a token: every replica refuses it within a second (admin)", 1, false, tokenRevokeFlags},
	{"secret set", "NAME", "create or replace a namespace's secret; the value comes from stdin or --from-file", 1, true, secretSetFlags},
	{"secret list", "", "a namespace's secrets: names and allowed hosts, never values", 0, true, secretListFlags},
	{"secret delete", "NAME", "delete a namespace's secret", 1, true, secretDeleteFlags},
	{"oidc keys", "", "the signing keys of the targets' OIDC tokens: next, current, previous, retired (admin)", 0, false, oidcKeysFlags},
	{"oidc rotate", "", "make the next signing key sign now; the current one stays published until its tokens expire (admin)", 0, false, oidcRotateFlags},
}

// commandNotes end a command's --help with what its flags alone do not say.
var commandNotes = map[string]string{
	"apply": `Each job goes to its namespace: the file's namespace: key, else -n, else default.
apply labels each job scheduler.dev/applied-by: the file's name (jobs.yaml), or --owner NAME.
--prune deletes runtime jobs only in the namespaces the file's jobs are in, only those the
file does not define, and only those with the same owner; -l team=billing narrows that to the
jobs with those labels, and --prune-any-owner also takes jobs made by hand or by another file.
Jobs of other namespaces and built-in jobs are never deleted. --dry-run shows the list first.
  scheduler apply -f billing.yaml --prune -l team=billing --dry-run`,
	"token create": `A viewer or editor token acts in the one namespace -n names (on the command line:
SCHEDULER_NAMESPACE is not taken for it); an admin token acts in every namespace. The value
is printed once, alone on stdout; the scheduler keeps only its hash.`,
	"oidc rotate": `Refused (rotation-too-soon) while the next key has been published for less than 15
minutes: a verifier's cached key set might not hold it yet. Keys also rotate on their own
every SCHEDULER_OIDC_KEY_ROTATION (720h).`,
	"namespace set": `Only the quotas named change; 0 removes a bound. --sql-targets, --http-allow and --env-secrets replace that list ("" empties it).`,
	"secret set": `The value is read from stdin (or --from-file), never from a flag: a flag would stay in
the shell's history and show in ps. One final line end is dropped.
  printf %s "$TOKEN" | scheduler secret set BILLING_TOKEN -n billing --allowed-host api.example.com`,
}

// clientGroups are the first words of the commands of two words: "scheduler token" alone
// lists its subcommands.
var clientGroups = []string{"namespace", "token", "secret", "oidc"}

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
http://127.0.0.1:8080, with the token in SCHEDULER_API_TOKEN; the job and secret commands act
in the namespace -n NS or SCHEDULER_NAMESPACE names, else in the one namespace the token may
read, else in namespace default; -n may come before or after the arguments):
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

// runGroup runs "scheduler GROUP SUBCOMMAND ...", or lists the group's subcommands.
func runGroup(ctx context.Context, group string, args, environ []string, stdout, stderr io.Writer) int {
	if len(args) > 0 {
		if c, ok := findClientCommand(group + " " + args[0]); ok {
			return runClient(ctx, c, args[1:], environ, stdout, stderr)
		}
	}
	w, code := stderr, exitUsage
	switch {
	case len(args) > 0 && slices.Contains([]string{"-h", "--help", "help"}, args[0]):
		w, code = stdout, exitOK
	case len(args) > 0:
		fmt.Fprintf(stderr, "scheduler %s: unknown subcommand %q\n\n", group, args[0])
	}
	fmt.Fprintf(w, "Usage: scheduler %s SUBCOMMAND [flags]\n\n", group)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, c := range clientCommands {
		if strings.HasPrefix(c.name, group+" ") {
			fmt.Fprintf(tw, "  scheduler %s %s\t%s\n", c.name, c.args, c.summary)
		}
	}
	tw.Flush()
	fmt.Fprintf(w, "\nRun \"scheduler %s SUBCOMMAND --help\" for its flags.\n", group)
	return code
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
	ns := namespace.Default
	if cmd.namespaced {
		ns = env.String("SCHEDULER_NAMESPACE", namespace.Default)
		fs.StringVar(&ns, "n", ns, "the namespace to act in (SCHEDULER_NAMESPACE)")
		fs.StringVar(&ns, "namespace", ns, "the same as -n")
	}
	runCmd := cmd.flags(fs)
	usage := func(w io.Writer) {
		fs.SetOutput(w)
		fmt.Fprintf(w, "Usage: %s [flags]\n\n%s.\n\nFlags:\n", strings.Join(strings.Fields("scheduler "+cmd.name+" "+cmd.args), " "), upperFirst(cmd.summary))
		fs.PrintDefaults()
		fmt.Fprint(w, "\nThe token comes from SCHEDULER_API_TOKEN. Exit codes: 0 ok, 1 failed, 2 usage, 3 unreachable or refused.\n")
		if note := commandNotes[cmd.name]; note != "" {
			fmt.Fprintf(w, "\n%s\n", note)
		}
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
	if !namespace.Valid(ns) {
		fmt.Fprintf(stderr, "scheduler %s: -n (or SCHEDULER_NAMESPACE) must name a namespace: 1 to 63 lower-case letters, digits and '-' (e.g. billing), not %q\n", cmd.name, ns)
		return exitUsage
	}
	// token create tells a namespace named on its command line from the environment's.
	nsGiven := false
	fs.Visit(func(f *flag.Flag) { nsGiven = nsGiven || f.Name == "n" || f.Name == "namespace" })
	u, err := url.Parse(*base)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		fmt.Fprintf(stderr, "scheduler %s: --url must be an http(s) URL such as %s, not %q\n", cmd.name, urlDefault, *base)
		return exitUsage
	}
	if cmd.namespaced && !nsGiven && cmd.name != "token create" {
		if env.String("SCHEDULER_NAMESPACE", "") == "" {
			ns = impliedNamespace(ctx, client.New(*base, client.WithToken(env.String("SCHEDULER_API_TOKEN", ""))), ns)
		}
	}
	x := &cli{
		c: client.New(*base, client.WithToken(env.String("SCHEDULER_API_TOKEN", "")), client.WithNamespace(ns),
			client.WithHTTPClient(&http.Client{Timeout: serverMaxWait + time.Minute})),
		stdin: stdin, stdout: stdout, stderr: stderr, json: *output == "json", now: time.Now,
		ns: ns, nsGiven: nsGiven,
	}
	return runCmd(ctx, x, positional)
}

// impliedNamespace is the namespace a token implies when neither -n nor SCHEDULER_NAMESPACE
// names one: the only namespace a non-admin token may read (GET /v1/whoami). Otherwise, or
// when whoami does not answer, it is def.
func impliedNamespace(ctx context.Context, c *client.Client, def string) string {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	w, err := c.Whoami(ctx)
	if err != nil || w.Admin {
		return def
	}
	var names []string
	for _, g := range w.Grants {
		if !slices.Contains(names, g.Namespace) {
			names = append(names, g.Namespace)
		}
	}
	if len(names) == 1 && namespace.Valid(names[0]) {
		return names[0]
	}
	return def
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

// fail reports an API error on one line, each wrong field of a refused request on one line
// more, and returns its exit code. An unknown job or namespace is a usage error that lists
// the ones there are.
func (x *cli) fail(ctx context.Context, err error) int {
	if u := (*client.UnreachableError)(nil); errors.As(err, &u) {
		fmt.Fprintf(x.stderr, "scheduler: Server unreachable: %v (check --url or SCHEDULER_URL, and that a replica runs there)\n", u.Err)
		return exitRefused
	}
	var e *client.Problem
	if !errors.As(err, &e) {
		fmt.Fprintf(x.stderr, "scheduler: %v\n", err)
		return exitFailure
	}
	fmt.Fprintf(x.stderr, "scheduler: %s\n", e.Error())
	if e.Status == http.StatusUnprocessableEntity {
		for _, f := range e.Errors {
			fmt.Fprintf(x.stderr, "  %s: %s\n", f.Field, f.Detail)
		}
	}
	switch {
	case e.Status == http.StatusUnauthorized || e.Status == http.StatusForbidden:
		return exitRefused
	case e.Status == http.StatusNotFound && e.Slug() == "job-not-found":
		if page, err := x.c.ListJobs(ctx, client.ListJobsOptions{}); err == nil {
			names := make([]string, len(page.Jobs))
			for i, j := range page.Jobs {
				names[i] = j.Name
			}
			more := ""
			if page.NextCursor != nil {
				more = ", … (scheduler jobs lists them all)"
			}
			fmt.Fprintf(x.stderr, "scheduler: the jobs%s are: %s%s\n", x.inNamespace(), strings.Join(names, ", "), more)
		}
		return exitUsage
	case e.Status == http.StatusNotFound && e.Slug() == "namespace-not-found":
		if list, err := x.c.ListNamespaces(ctx); err == nil && len(list) > 0 {
			names := make([]string, len(list))
			for i, n := range list {
				names[i] = n.Name
			}
			fmt.Fprintf(x.stderr, "scheduler: the namespaces this token may read are: %s (an admin makes one with: scheduler namespace create NS)\n", strings.Join(names, ", "))
		}
		return exitUsage
	case e.Status == http.StatusBadRequest || e.Status == http.StatusNotFound:
		return exitUsage
	default:
		return exitFailure
	}
}

// inNamespace is " in namespace NS" outside namespace default, for messages about jobs.
func (x *cli) inNamespace() string {
	if x.ns == namespace.Default {
		return ""
	}
	return " in namespace " + x.ns
}

// printJSON writes an answer as indented JSON, for scripts: a JSON text, or a value (one of
// package client's types) to encode.
func (x *cli) printJSON(answer any) int {
	var raw []byte
	switch v := answer.(type) {
	case json.RawMessage:
		raw = v
	case []byte:
		raw = v
	default:
		var err error
		if raw, err = json.Marshal(answer); err != nil {
			fmt.Fprintf(x.stderr, "scheduler: encode the answer: %v\n", err)
			return exitFailure
		}
	}
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
