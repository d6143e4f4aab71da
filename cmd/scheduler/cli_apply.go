package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/schedulerhq/scheduler/internal/definition"
)

// scheduler apply -f FILE: declarative, as kubectl apply is. apply reads the job list once
// (GET /v1/jobs, page by page), which carries every job's version and definition, and
// compares each job of the file with it, normalised as the server normalises it: an equal
// one costs no request, so a second apply of the same file sends no write. A new job is
// POSTed (409 if someone created it meanwhile) and a changed one PUT with If-Match of the
// version listed (412 if someone edited it meanwhile), so a concurrent edit fails instead of
// being overwritten; --prune DELETEs with If-Match too. The file's format: cli_jobfile.go.

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

// kindBuiltin is the kind of a job compiled into the scheduler.
const kindBuiltin = "builtin"

// jobView is the part of the API's job view these commands use. A built-in job has no
// version and no definition.
type jobView struct {
	Name       string          `json:"name"`
	Kind       string          `json:"kind"`
	Version    int64           `json:"version"`
	Definition json.RawMessage `json:"definition"`
}

// runtime reports a job defined through the API, the only kind apply --prune deletes. A
// view without a kind (a server older than runtime jobs) is not one.
func (v *jobView) runtime() bool { return v.Kind != "" && v.Kind != kindBuiltin }

func (v *jobView) hasDefinition() bool {
	return len(v.Definition) > 0 && string(v.Definition) != "null"
}

func jobPath(name string) string { return "/v1/jobs/" + url.PathEscape(name) }

// ifMatch is the header that makes a change fail (412) unless the job is still at version;
// none for version 0 (no job yet).
func ifMatch(version int64) map[string]string {
	if version <= 0 {
		return nil
	}
	return map[string]string{"If-Match": `"` + strconv.FormatInt(version, 10) + `"`}
}

// refused reports an error that ends a command at once with exit 3: the server could not be
// reached, or refused the token. Trying the next job would only be refused again.
func refused(err error) bool {
	var e *apiError
	return errors.As(err, &e) && (e.Status == 0 || e.Status == http.StatusUnauthorized || e.Status == http.StatusForbidden)
}

func applyFlags(fs *flag.FlagSet) func(context.Context, *cli, []string) int {
	file := fs.String("f", "", "the YAML file of jobs (jobs: [...]); - reads stdin")
	prune := fs.Bool("prune", false, "also delete the runtime jobs that the file does not define (built-in jobs are never deleted)")
	dryRun := fs.Bool("dry-run", false, "change nothing: show field by field what apply would change")
	return func(ctx context.Context, x *cli, _ []string) int {
		if *file == "" {
			fmt.Fprintln(x.stderr, "scheduler apply: -f FILE is required (-f - reads stdin)")
			return exitUsage
		}
		defs, err := readJobs(*file, x.stdin)
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
		return x.apply(ctx, defs, *prune, *dryRun)
	}
}

// change is what apply did to one job, or with --dry-run would do.
type change struct {
	Name   string `json:"name"`
	Action string `json:"action"`
	// Version is the job's version after apply (with --dry-run, before).
	Version int64 `json:"version,omitempty"`
	// Fields are the fields an update changes (--dry-run).
	Fields []fieldChange `json:"fields,omitempty"`
	// Errors say why the job failed, one wrong field or one problem each.
	Errors []string `json:"errors,omitempty"`
}

func (x *cli) apply(ctx context.Context, defs []definition.Definition, prune, dryRun bool) int {
	// One read of the job list is all apply needs to know: each job's version and
	// definition. --prune deletes what the server had then, each at the version listed
	// (If-Match): a job created or edited meanwhile by someone else is not deleted unseen.
	server, err := x.c.listJobs(ctx)
	if err != nil {
		return x.fail(ctx, err)
	}
	byName := make(map[string]*jobView, len(server))
	for i := range server {
		byName[server[i].Name] = &server[i]
	}
	var changes []change
	failed := 0
	record := func(c change) {
		changes = append(changes, c)
		if c.Action == actionFailed {
			failed++
		}
		x.printChange(c, dryRun)
	}
	inFile := make(map[string]bool, len(defs))
	for _, d := range defs {
		inFile[d.Name] = true
		c, err := x.applyJob(ctx, d, byName[d.Name], dryRun)
		if refused(err) {
			return x.fail(ctx, err)
		}
		if err != nil {
			c = change{Name: d.Name, Action: actionFailed, Errors: problemLines(err)}
		}
		record(c)
	}
	var unpruned []string
	for _, v := range server {
		switch {
		case !prune || !v.runtime() || inFile[v.Name]:
		case dryRun:
			record(change{Name: v.Name, Action: actionDelete, Version: v.Version})
		case failed > 0:
			// A job of the file that failed may be the one replacing this one (a rename):
			// deleting it now would leave neither running.
			unpruned = append(unpruned, v.Name)
		default:
			_, err := x.c.do(ctx, "DELETE", jobPath(v.Name), nil, nil, ifMatch(v.Version), nil)
			switch {
			case refused(err):
				return x.fail(ctx, err)
			case err != nil:
				record(change{Name: v.Name, Action: actionFailed, Errors: problemLines(err)})
			default:
				record(change{Name: v.Name, Action: actionDeleted})
			}
		}
	}

	if x.json {
		b, _ := json.Marshal(map[string]any{"dry_run": dryRun, "jobs": changes})
		x.printJSON(b)
	} else if dryRun {
		fmt.Fprintln(x.stdout, planSummary(changes))
	}
	if len(unpruned) > 0 {
		fmt.Fprintf(x.stderr, "scheduler: not pruned, because a job of the file failed (it may replace them): %s\n", strings.Join(unpruned, ", "))
	}
	if failed > 0 {
		fmt.Fprintf(x.stderr, "scheduler: %d of %d job(s) failed\n", failed, len(changes))
		return exitFailure
	}
	return exitOK
}

// applyJob brings one job of the file to the server, given cur, its view in the list apply
// read (nil: no such job then). A job whose definition, normalised as the server normalises
// it, equals the one listed is unchanged and costs no request. Otherwise a new job is
// POSTed, which fails if someone created it since the list was read, and a changed one is
// PUT with If-Match of the version listed, which fails (412) if someone edited it since. A
// dry run sends the same request with ?dry_run=true, for the server's checks and the
// normalised definition, which it compares field by field with the current one.
func (x *cli) applyJob(ctx context.Context, d definition.Definition, cur *jobView, dryRun bool) (change, error) {
	switch {
	case cur == nil:
		next, err := x.c.writeJob(ctx, http.MethodPost, "/v1/jobs", d, 0, dryRun)
		if err != nil {
			return change{}, err
		}
		if dryRun {
			return change{Name: d.Name, Action: actionCreate}, nil
		}
		return change{Name: d.Name, Action: actionCreated, Version: next.Version}, nil
	case cur.runtime() && sameDefinition(cur.Definition, d):
		return change{Name: d.Name, Action: actionUnchanged, Version: cur.Version}, nil
	case dryRun:
		// A built-in job's name reaches the server too, which refuses it in its own words.
		next, err := x.c.writeJob(ctx, http.MethodPut, jobPath(d.Name), d, 0, true)
		if err != nil {
			return change{}, err
		}
		c := change{Name: d.Name, Action: actionUnchanged, Version: cur.Version}
		if c.Fields, err = diffDefinitions(cur.Definition, next.Definition); err != nil {
			return change{}, err
		}
		if len(c.Fields) > 0 {
			c.Action = actionUpdate
		}
		return c, nil
	}
	next, err := x.c.writeJob(ctx, http.MethodPut, jobPath(d.Name), d, cur.Version, false)
	if err != nil {
		return change{}, err
	}
	// The server keeps the version of a definition equal to the stored one; a CLI that
	// normalises differently from the server it talks to is told so here.
	if next.Version == cur.Version {
		return change{Name: d.Name, Action: actionUnchanged, Version: next.Version}, nil
	}
	return change{Name: d.Name, Action: actionUpdated, Version: next.Version}, nil
}

// sameDefinition reports whether a job's listed definition is d once d is normalised as the
// server normalises what it stores (internal/definition.Check: defaults filled in, durations
// the short way). A definition the check refuses is never the same: the server says why.
func sameDefinition(listed json.RawMessage, d definition.Definition) bool {
	if len(listed) == 0 || string(listed) == "null" {
		return false
	}
	stored, err := definition.Decode(listed)
	if err != nil {
		return false
	}
	j, errs := definition.Check(d, definition.Env{})
	if errs != nil {
		return false
	}
	a, errA := json.Marshal(stored)
	b, errB := json.Marshal(j.Def)
	return errA == nil && errB == nil && bytes.Equal(a, b)
}

// jobListPage is how many jobs apply asks for per page of GET /v1/jobs: the API's largest.
const jobListPage = 500

// listJobs reads every job's view, page by page (GET /v1/jobs?limit=&cursor=).
func (c *client) listJobs(ctx context.Context) ([]jobView, error) {
	var all []jobView
	q := url.Values{"limit": {strconv.Itoa(jobListPage)}}
	for {
		var page struct {
			Jobs       []jobView `json:"jobs"`
			NextCursor *string   `json:"next_cursor"`
		}
		if _, err := c.do(ctx, "GET", "/v1/jobs", q, nil, nil, &page); err != nil {
			return nil, err
		}
		all = append(all, page.Jobs...)
		if page.NextCursor == nil || *page.NextCursor == "" || len(page.Jobs) == 0 {
			return all, nil
		}
		q.Set("cursor", *page.NextCursor)
	}
}

// printChange writes one job's line(s): results on stdout, failures on stderr with every
// wrong field. Unchanged jobs say nothing in a dry run; its summary counts them.
func (x *cli) printChange(c change, dryRun bool) {
	if c.Action == actionFailed {
		for _, e := range c.Errors {
			fmt.Fprintf(x.stderr, "%s: %s\n", c.Name, e)
		}
		return
	}
	if x.json {
		return
	}
	switch c.Action {
	case actionCreated, actionUpdated:
		fmt.Fprintf(x.stdout, "%s %s (version %d)\n", c.Action, c.Name, c.Version)
	case actionUnchanged:
		if !dryRun {
			fmt.Fprintf(x.stdout, "unchanged %s\n", c.Name)
		}
	case actionDeleted:
		fmt.Fprintf(x.stdout, "deleted %s\n", c.Name)
	case actionCreate:
		fmt.Fprintf(x.stdout, "+ %s (would be created)\n", c.Name)
	case actionUpdate:
		for _, f := range c.Fields {
			fmt.Fprintf(x.stdout, "~ %s: %s %s → %s\n", c.Name, f.Field, renderValue(f.From), renderValue(f.To))
		}
	case actionDelete:
		fmt.Fprintf(x.stdout, "- %s (would be deleted, --prune)\n", c.Name)
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

// problemLines says why a job failed: one line per wrong field of an invalid definition,
// else the server's words.
func problemLines(err error) []string {
	var de *definitionError
	switch {
	case !errors.As(err, &de):
		return []string{err.Error()}
	case de.slug() == "invalid-definition" && len(de.Fields) > 0:
		lines := make([]string, len(de.Fields))
		for i, f := range de.Fields {
			lines[i] = f.Field + ": " + f.Detail
		}
		return lines
	case de.Status == http.StatusConflict && de.slug() == "job-exists":
		// POST found the name taken: someone created the job after apply read the list.
		return []string{"the job was created on the server since apply read the list; run apply again"}
	case de.Status == http.StatusPreconditionFailed:
		// The server's detail tells an API client to GET and send If-Match again, which
		// for apply is running it again.
		now := ""
		if len(de.Fields) > 0 {
			now = " (" + de.Fields[0].Detail + ")"
		}
		return []string{"the job changed on the server since apply read it" + now + "; run apply again"}
	}
	return []string{de.Error()}
}

// fieldProblem is one field a problem is about: every wrong field of a definition (422
// invalid-definition), or the header of a failed If-Match (412).
type fieldProblem struct {
	Field  string `json:"field"`
	Detail string `json:"detail"`
}

// definitionError is a problem answer to a PUT, with every wrong field it names.
type definitionError struct {
	*apiError
	Fields []fieldProblem
}

func (e *definitionError) Unwrap() error { return e.apiError }

// writeJob sends a definition with method to path (POST /v1/jobs, PUT /v1/jobs/{name}):
// with If-Match when version is one (not 0), or with ?dry_run=true. It does what client.do
// does, and keeps the list of wrong fields of a 422 answer, which do drops.
func (c *client) writeJob(ctx context.Context, method, path string, d definition.Definition, version int64, dryRun bool) (jobView, error) {
	var v jobView
	body, err := json.Marshal(d)
	if err != nil {
		return v, err
	}
	u := c.base + path
	if dryRun {
		u += "?dry_run=true"
	}
	req, err := http.NewRequestWithContext(ctx, method, u, bytes.NewReader(body))
	if err != nil {
		return v, &apiError{Title: "Invalid --url", Detail: err.Error()}
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("Content-Type", "application/json")
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	for k, v := range ifMatch(version) {
		req.Header.Set(k, v)
	}
	res, err := c.http.Do(req)
	if err != nil {
		return v, &apiError{Title: "Server unreachable",
			Detail: fmt.Sprintf("%s (check --url or SCHEDULER_URL, and that a replica runs there)", unwrapURLError(err))}
	}
	defer res.Body.Close()
	b, err := io.ReadAll(io.LimitReader(res.Body, 16<<20))
	if err != nil {
		return v, &apiError{Title: "Incomplete answer", Detail: err.Error()}
	}
	if res.StatusCode >= 400 {
		var p struct {
			apiError
			Errors []fieldProblem `json:"errors"`
		}
		if json.Unmarshal(b, &p) != nil || p.Title == "" {
			p.Title = fmt.Sprintf("HTTP %d", res.StatusCode)
			p.Detail = strings.TrimSpace(string(b))
		}
		p.Status = res.StatusCode
		return v, &definitionError{apiError: &p.apiError, Fields: p.Errors}
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return v, &apiError{Title: "Unexpected answer", Detail: fmt.Sprintf("%s %s: %v", method, path, err)}
	}
	return v, nil
}
