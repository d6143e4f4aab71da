package main

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"strings"

	"github.com/schedulerhq/scheduler/client"
	"github.com/schedulerhq/scheduler/internal/namespace"
	"github.com/schedulerhq/scheduler/internal/runtimejob"
)

// scheduler apply -f FILE: declarative, as kubectl apply is. Each job of the file belongs to
// a namespace (its namespace: key, else -n, else default). apply reads the job list of each
// namespace the file names once (GET /v1/jobs or /v1/namespaces/{ns}/jobs, page by page),
// before it writes anything: the list carries every job's version and definition, and each
// job of the file is compared with it, normalised as the server normalises it: an equal one
// costs no request, so a second apply of the same file sends no write. A new job is POSTed
// (409 if someone created it meanwhile) and a changed one PUT with If-Match of the version
// listed (412 if someone edited it meanwhile), so a concurrent edit fails instead of being
// overwritten; --prune DELETEs with If-Match too, and only in the namespaces the file names,
// so one team's file never deletes another's jobs. The file's format: cli_jobfile.go.

// What apply did to a job, or with --dry-run would do.
const (
	actionCreated   = "created"
	actionUpdated   = "updated"
	actionUnchanged = "unchanged"
	actionDeleted   = "deleted"
	actionFailed    = "failed"
	actionCreate    = "create"
	actionUpdate    = "update"
	actionDelete    = "delete"
)

// jobVersion is a job's listed version; 0 for a built-in job, which has none.
func jobVersion(v *client.Job) int64 {
	if v.Version == nil {
		return 0
	}
	return *v.Version
}

// hasDefinition reports a job view with a definition: a runtime job's that still decodes.
func hasDefinition(v *client.Job) bool {
	return len(v.Definition) > 0 && string(v.Definition) != "null"
}

// refused reports an error that ends a command at once with exit 3: the server could not be
// reached, or refused the token. Trying the next job would only be refused again.
func refused(err error) bool {
	var e *client.Problem
	var u *client.UnreachableError
	return errors.As(err, &u) || errors.As(err, &e) && (e.Status == http.StatusUnauthorized || e.Status == http.StatusForbidden)
}

func applyFlags(fs *flag.FlagSet) func(context.Context, *cli, []string) int {
	file := fs.String("f", "", "the YAML file of jobs (jobs: [...]); - reads stdin")
	prune := fs.Bool("prune", false, "also delete the runtime jobs of the file's namespaces that it does not define and that this file (its owner) applied (other namespaces and built-in jobs are never touched)")
	owner := fs.String("owner", "", `the owner label (`+ownerLabel+`) apply sets on the file's jobs, and the one --prune deletes; default the file's name ("stdin" for -f -)`)
	var sel string
	fs.StringVar(&sel, "l", "", "with --prune, delete only jobs with these labels: key=value, key!=value, key, !key, comma-separated (e.g. team=billing)")
	fs.StringVar(&sel, "selector", "", "the same as -l")
	anyOwner := fs.Bool("prune-any-owner", false, "with --prune, also delete jobs another file, another --owner or a person made (still only those -l selects)")
	dryRun := fs.Bool("dry-run", false, "change nothing: show field by field what apply would change")
	reason := fs.String("reason", "", "why (kept in the audit log of each job created, updated or deleted)")
	return func(ctx context.Context, x *cli, _ []string) int {
		x.reason = *reason
		if *file == "" {
			fmt.Fprintln(x.stderr, "scheduler apply: -f FILE is required (-f - reads stdin)")
			return exitUsage
		}
		defs, err := readJobs(*file, x.stdin, x.ns)
		var fe *fileError
		switch {
		case errors.As(err, &fe):
			fmt.Fprintf(x.stderr, "scheduler: %s: %d problem(s); nothing was sent to the server:\n", fe.file, len(fe.problems))
			for _, p := range fe.problems {
				fmt.Fprintf(x.stderr, "  %s\n", p)
			}
			return exitUsage
		case err != nil:
			fmt.Fprintf(x.stderr, "scheduler: %v\n", err)
			return exitUsage
		}
		selector, err := parseSelector(sel)
		if err != nil {
			fmt.Fprintf(x.stderr, "scheduler apply: -l: %v\n", err)
			return exitUsage
		}
		if (sel != "" || *anyOwner) && !*prune {
			fmt.Fprintln(x.stderr, "scheduler apply: -l and --prune-any-owner scope --prune; add --prune")
			return exitUsage
		}
		who := cmp.Or(*owner, defaultOwner(*file))
		withOwner(defs, who)
		scope := pruneScope{owner: who, selector: selector}
		if *anyOwner {
			scope.owner = ""
		}
		if !*prune {
			scope = pruneScope{}
		}
		return x.apply(ctx, defs, *prune, *dryRun, scope)
	}
}

// change is what apply did to one job, or with --dry-run would do.
type change struct {
	Name      string `json:"name"`
	Namespace string `json:"namespace"`
	Action    string `json:"action"`
	// Version is the job's version after apply (with --dry-run, before).
	Version int64 `json:"version,omitempty"`
	// Fields are the fields an update changes (--dry-run).
	Fields []fieldChange `json:"fields,omitempty"`
	// Errors say why the job failed, one wrong field or one problem each.
	Errors []string `json:"errors,omitempty"`
}

// label names the job in apply's lines: its name in namespace default, "billing/name" in
// another, so a file of several namespaces says where each line happened.
func (c change) label() string {
	if c.Namespace == "" || c.Namespace == namespace.Default {
		return c.Name
	}
	return c.Namespace + "/" + c.Name
}

// byNamespace groups a file's jobs by namespace, in the order the file first names each.
func byNamespace(defs []runtimejob.Definition) (order []string, jobs map[string][]runtimejob.Definition) {
	jobs = map[string][]runtimejob.Definition{}
	for _, d := range defs {
		ns := cmp.Or(d.Namespace, namespace.Default)
		if _, seen := jobs[ns]; !seen {
			order = append(order, ns)
		}
		jobs[ns] = append(jobs[ns], d)
	}
	return order, jobs
}

// apply reads each namespace's job list, brings the file's jobs to the server, prunes with
// --prune, and reports. Its steps share an applyRun: the lists and what was done so far.
func (x *cli) apply(ctx context.Context, defs []runtimejob.Definition, prune, dryRun bool, scope pruneScope) int {
	order, inNS := byNamespace(defs)
	lists, err := x.readLists(ctx, order)
	if err != nil {
		return x.fail(ctx, err)
	}
	r := &applyRun{x: x, dryRun: dryRun, order: order, lists: lists}
	if err := r.applyJobs(ctx, inNS); err != nil {
		return x.fail(ctx, err)
	}
	var unpruned []string
	if prune {
		if unpruned, err = r.prune(ctx, scope); err != nil {
			return x.fail(ctx, err)
		}
	}
	return r.report(unpruned)
}

// readLists reads each namespace's job list, once: it is all apply needs to know, each job's
// version and definition. All are read before the first write, so a namespace that does
// not exist, or that the token may not read, stops apply with nothing changed.
func (x *cli) readLists(ctx context.Context, order []string) (map[string][]client.Job, error) {
	lists := make(map[string][]client.Job, len(order))
	for _, ns := range order {
		server, err := listJobs(ctx, x.c, ns)
		if err != nil {
			return nil, err
		}
		lists[ns] = server
	}
	return lists, nil
}

// applyRun is one apply under way: the lists it read before the first write, and what it
// has done since, which its steps share.
type applyRun struct {
	x      *cli
	dryRun bool
	order  []string                // the file's namespaces, in the order it names them
	lists  map[string][]client.Job // each namespace's jobs, as read before the first write
	inFile map[string]bool         // the file's jobs, by namespace.Key: never pruned

	changes []change
	// failed counts the failed jobs as apply goes, not at the end: --prune checks it before
	// each delete.
	failed int
}

// record keeps a job's change for the report and prints its line at once: a refusal that
// ends apply midway leaves the lines of what it had already done.
func (r *applyRun) record(c change) {
	r.changes = append(r.changes, c)
	if c.Action == actionFailed {
		r.failed++
	}
	r.x.printChange(c, r.dryRun)
}

// applyJobs brings each job of the file to the server, namespace by namespace, parents
// first. A job that fails is recorded and the next one tried; a refusal (unreachable, or
// the token refused) is returned at once: the next job would only be refused again.
func (r *applyRun) applyJobs(ctx context.Context, inNS map[string][]runtimejob.Definition) error {
	r.inFile = make(map[string]bool)
	for _, ns := range r.order {
		byName := make(map[string]*client.Job, len(r.lists[ns]))
		for i := range r.lists[ns] {
			byName[r.lists[ns][i].Name] = &r.lists[ns][i]
		}
		for _, d := range parentsFirst(inNS[ns]) {
			r.inFile[namespace.Key(ns, d.Name)] = true
			c, err := r.x.applyJob(ctx, ns, d, byName[d.Name], r.dryRun)
			if refused(err) {
				return err
			}
			if err != nil {
				c = change{Name: d.Name, Action: actionFailed, Errors: problemLines(err)}
			}
			c.Namespace = ns
			r.record(c)
		}
	}
	return nil
}

// prune deletes what the server had when apply read the lists: the runtime jobs of the
// file's namespaces that the file does not define and scope selects, children first (the
// server refuses to delete a parent). It returns the jobs it left because a job of the file
// failed, and a refusal, which ends apply.
func (r *applyRun) prune(ctx context.Context, scope pruneScope) (unpruned []string, err error) {
	for _, ns := range r.order {
		for _, v := range childrenFirst(r.lists[ns]) {
			if !v.Runtime() || r.inFile[namespace.Key(ns, v.Name)] || !scope.candidate(jobLabels(&v)) {
				continue
			}
			switch {
			case r.dryRun:
				r.record(change{Name: v.Name, Namespace: ns, Version: jobVersion(&v), Action: actionDelete})
			case r.failed > 0:
				// A job of the file that failed may be the one replacing this one (a
				// rename): deleting it now would leave neither running.
				unpruned = append(unpruned, change{Name: v.Name, Namespace: ns}.label())
			default:
				gone, err := r.x.deleteListed(ctx, ns, &v)
				if err != nil {
					return nil, err
				}
				r.record(gone)
			}
		}
	}
	return unpruned, nil
}

// deleteListed deletes job v of namespace ns at the version listed (If-Match): a job created
// or edited meanwhile by someone else is not deleted unseen. A refusal is returned, to end
// apply; any other error is this job's failure.
func (x *cli) deleteListed(ctx context.Context, ns string, v *client.Job) (change, error) {
	gone := change{Name: v.Name, Namespace: ns}
	err := x.c.InNamespace(ns).DeleteJob(ctx, v.Name, client.WriteJobOptions{Version: jobVersion(v), Reason: x.reason})
	switch {
	case refused(err):
		return change{}, err
	case err != nil:
		gone.Action, gone.Errors = actionFailed, problemLines(err)
	default:
		gone.Action = actionDeleted
	}
	return gone, nil
}

// report ends apply: every change as JSON with -o json, else a dry run's summary line; the
// jobs --prune left, and why; exit 1 if any job failed, once every other job was tried.
func (r *applyRun) report(unpruned []string) int {
	x := r.x
	if x.json {
		b, _ := json.Marshal(map[string]any{"dry_run": r.dryRun, "jobs": r.changes})
		x.printJSON(b)
	} else if r.dryRun {
		fmt.Fprintln(x.stdout, planSummary(r.changes))
	}
	if len(unpruned) > 0 {
		fmt.Fprintf(x.stderr, "scheduler: not pruned, because a job of the file failed (it may replace them): %s\n", strings.Join(unpruned, ", "))
	}
	if r.failed > 0 {
		fmt.Fprintf(x.stderr, "scheduler: %d of %d job(s) failed\n", r.failed, len(r.changes))
		return exitFailure
	}
	return exitOK
}

// applyJob brings one job of the file to namespace ns on the server, given cur, its view in the list apply
// read (nil: no such job then). A job whose definition, normalised as the server normalises
// it, equals the one listed is unchanged and costs no request. Otherwise a new job is
// POSTed, which fails if someone created it since the list was read, and a changed one is
// PUT with If-Match of the version listed, which fails (412) if someone edited it since. A
// dry run sends the same request with ?dry_run=true, for the server's checks and the
// normalised definition, which it compares field by field with the current one.
func (x *cli) applyJob(ctx context.Context, ns string, d runtimejob.Definition, cur *client.Job, dryRun bool) (change, error) {
	switch {
	case cur == nil:
		next, err := x.writeJob(ctx, ns, d, -1, dryRun)
		if err != nil {
			return change{}, err
		}
		if dryRun {
			return change{Name: d.Name, Action: actionCreate}, nil
		}
		return change{Name: d.Name, Action: actionCreated, Version: jobVersion(next)}, nil
	case cur.Runtime() && sameDefinition(cur.Definition, d):
		return change{Name: d.Name, Action: actionUnchanged, Version: jobVersion(cur)}, nil
	case dryRun:
		// A built-in job's name reaches the server too, which refuses it in its own words.
		next, err := x.writeJob(ctx, ns, d, 0, true)
		if err != nil {
			return change{}, err
		}
		c := change{Name: d.Name, Action: actionUnchanged, Version: jobVersion(cur)}
		if c.Fields, err = diffDefinitions(cur.Definition, next.Definition); err != nil {
			return change{}, err
		}
		if len(c.Fields) > 0 {
			c.Action = actionUpdate
		}
		return c, nil
	}
	next, err := x.writeJob(ctx, ns, d, jobVersion(cur), false)
	if err != nil {
		return change{}, err
	}
	// The server keeps the version of a definition equal to the stored one; a CLI that
	// normalises differently from the server it talks to is told so here.
	if jobVersion(next) == jobVersion(cur) {
		return change{Name: d.Name, Action: actionUnchanged, Version: jobVersion(next)}, nil
	}
	return change{Name: d.Name, Action: actionUpdated, Version: jobVersion(next)}, nil
}

// sameDefinition reports whether a job's listed definition is d once d is normalised as the
// server normalises what it stores (internal/runtimejob.Check: defaults filled in, durations
// the short way). A definition the check refuses is never the same: the server says why.
func sameDefinition(listed json.RawMessage, d runtimejob.Definition) bool {
	if len(listed) == 0 || string(listed) == "null" {
		return false
	}
	stored, err := runtimejob.Decode(listed)
	if err != nil {
		return false
	}
	j, errs := runtimejob.Check(d, runtimejob.Env{})
	if errs != nil {
		return false
	}
	a, errA := json.Marshal(stored)
	b, errB := json.Marshal(j.Def)
	return errA == nil && errB == nil && bytes.Equal(a, b)
}

// printChange writes one job's line(s): results on stdout, failures on stderr with every
// wrong field. Unchanged jobs say nothing in a dry run; its summary counts them.
func (x *cli) printChange(c change, dryRun bool) {
	if c.Action == actionFailed {
		for _, e := range c.Errors {
			fmt.Fprintf(x.stderr, "%s: %s\n", c.label(), e)
		}
		return
	}
	if x.json {
		return
	}
	switch c.Action {
	case actionCreated, actionUpdated:
		fmt.Fprintf(x.stdout, "%s %s (version %d)\n", c.Action, c.label(), c.Version)
	case actionUnchanged:
		if !dryRun {
			fmt.Fprintf(x.stdout, "unchanged %s\n", c.label())
		}
	case actionDeleted:
		fmt.Fprintf(x.stdout, "deleted %s\n", c.label())
	case actionCreate:
		fmt.Fprintf(x.stdout, "+ %s (would be created)\n", c.label())
	case actionUpdate:
		for _, f := range c.Fields {
			fmt.Fprintf(x.stdout, "~ %s: %s %s → %s\n", c.label(), f.Field, renderValue(f.From), renderValue(f.To))
		}
	case actionDelete:
		fmt.Fprintf(x.stdout, "- %s (would be deleted, --prune)\n", c.label())
	}
}

// planSummary is a dry run's last line: "2 to create, 1 to update, 3 unchanged, 0 to delete".
func planSummary(changes []change) string {
	n := map[string]int{}
	for _, c := range changes {
		n[c.Action]++
	}
	s := fmt.Sprintf("%d to create, %d to update, %d unchanged, %d to delete",
		n[actionCreate], n[actionUpdate], n[actionUnchanged], n[actionDelete])
	if n[actionFailed] > 0 {
		s += fmt.Sprintf(", %d failed", n[actionFailed])
	}
	return s
}

// jobLabels are a listed job's labels: its definition's.
func jobLabels(v *client.Job) map[string]string {
	if len(v.Labels) > 0 {
		return v.Labels
	}
	var d struct {
		Labels map[string]string `json:"labels"`
	}
	if hasDefinition(v) {
		_ = json.Unmarshal(v.Definition, &d)
	}
	return d.Labels
}
