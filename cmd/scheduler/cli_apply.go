package main

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"os"
	"reflect"
	"slices"
	"strconv"
	"strings"

	yamlv2 "go.yaml.in/yaml/v2"
	"sigs.k8s.io/yaml"

	"github.com/schedulerhq/scheduler/internal/definition"
)

// The runtime-job commands: apply, get, delete.
//
// A file of jobs is YAML (JSON is YAML too) holding `jobs:` and a list of definitions with
// the API's keys: sigs.k8s.io/yaml turns the YAML into JSON and definition.Decode reads each
// job as the server does, refusing unknown keys. apply is declarative, as kubectl apply is:
// it PUTs every job of the file, each with If-Match of the version read just before, so an
// edit made meanwhile by someone else fails with 412 instead of being overwritten; the
// server keeps the version of a job whose definition did not change, which is how apply
// tells "unchanged" from "updated", and why a second apply of the same file changes nothing.

const (
	// maxJobsFile caps what apply reads; ten thousand jobs (SCHEDULER_MAX_JOBS) fit in it.
	maxJobsFile = 16 << 20
	kindBuiltin = "builtin"
	// fileShape says what a file of jobs looks like, for the errors about its shape.
	fileShape = `a file holds "jobs:" and a list of job definitions, e.g. jobs: [{name: daily-report, schedule: "0 2 * * *", http: {url: "https://..."}}]`
)

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
	// --prune deletes what the server had when apply started, each at the version listed
	// (If-Match): a job created or edited meanwhile by someone else is not deleted unseen.
	var server []jobView
	if prune {
		var list struct {
			Jobs []jobView `json:"jobs"`
		}
		if _, err := x.c.do(ctx, "GET", "/v1/jobs", nil, nil, nil, &list); err != nil {
			return x.fail(ctx, err)
		}
		server = list.Jobs
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
		c, err := x.applyJob(ctx, d, dryRun)
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
		case !v.runtime() || inFile[v.Name]:
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

// applyJob reads the job's current version, then PUTs the definition: for real with
// If-Match of that version, or with ?dry_run=true to learn the normalised definition the
// job would have, and compare it field by field with the current one.
func (x *cli) applyJob(ctx context.Context, d definition.Definition, dryRun bool) (change, error) {
	cur, err := x.getJob(ctx, d.Name)
	if err != nil {
		return change{}, err
	}
	var version int64
	if cur != nil && !dryRun {
		version = cur.Version
	}
	next, status, err := x.c.putJob(ctx, d, version, dryRun)
	if err != nil {
		return change{}, err
	}
	c := change{Name: d.Name, Version: next.Version}
	switch {
	case dryRun && cur == nil:
		c.Action, c.Version = actionCreate, 0
	case dryRun:
		c.Version = cur.Version
		if c.Fields, err = diffDefinitions(cur.Definition, next.Definition); err != nil {
			return change{}, err
		}
		c.Action = actionUnchanged
		if len(c.Fields) > 0 {
			c.Action = actionUpdate
		}
	case status == http.StatusCreated:
		c.Action = actionCreated
	case cur != nil && next.Version == cur.Version:
		c.Action = actionUnchanged
	default:
		c.Action = actionUpdated
	}
	return c, nil
}

// getJob reads one job's view; nil when there is no such job.
func (x *cli) getJob(ctx context.Context, name string) (*jobView, error) {
	var v jobView
	_, err := x.c.do(ctx, "GET", jobPath(name), nil, nil, nil, &v)
	var e *apiError
	if errors.As(err, &e) && e.Status == http.StatusNotFound && e.slug() == "job-not-found" {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return &v, nil
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

// putJob sends a definition to PUT /v1/jobs/{name}: with If-Match when version is one
// (not 0), or with ?dry_run=true. It does what client.do does, and keeps the list of wrong
// fields of a 422 answer, which do drops.
func (c *client) putJob(ctx context.Context, d definition.Definition, version int64, dryRun bool) (jobView, int, error) {
	var v jobView
	body, err := json.Marshal(d)
	if err != nil {
		return v, 0, err
	}
	u := c.base + jobPath(d.Name)
	if dryRun {
		u += "?dry_run=true"
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, u, bytes.NewReader(body))
	if err != nil {
		return v, 0, &apiError{Title: "Invalid --url", Detail: err.Error()}
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
		return v, 0, &apiError{Title: "Server unreachable",
			Detail: fmt.Sprintf("%s (check --url or SCHEDULER_URL, and that a replica runs there)", unwrapURLError(err))}
	}
	defer res.Body.Close()
	b, err := io.ReadAll(io.LimitReader(res.Body, 16<<20))
	if err != nil {
		return v, res.StatusCode, &apiError{Title: "Incomplete answer", Detail: err.Error()}
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
		return v, res.StatusCode, &definitionError{apiError: &p.apiError, Fields: p.Errors}
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return v, res.StatusCode, &apiError{Title: "Unexpected answer", Detail: fmt.Sprintf("PUT %s: %v", jobPath(d.Name), err)}
	}
	return v, res.StatusCode, nil
}

// fileError is every problem of a file of jobs, found before anything is sent.
type fileError struct {
	file     string
	problems []string
}

func (e *fileError) Error() string { return e.file + ": " + strings.Join(e.problems, "; ") }

// readJobs reads a file of jobs ("-": stdin) and decodes every job, reporting every
// problem of the file at once: each names the job by its index and name.
func readJobs(path string, stdin io.Reader) ([]definition.Definition, error) {
	name, r := path, stdin
	if path != "-" {
		f, err := os.Open(path)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		r = f
	} else {
		name = "stdin"
	}
	data, err := io.ReadAll(io.LimitReader(r, maxJobsFile+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", name, err)
	}
	if len(data) > maxJobsFile {
		return nil, &fileError{name, []string{fmt.Sprintf("larger than %d MiB", maxJobsFile>>20)}}
	}
	defs, problems := parseJobs(data)
	if len(problems) > 0 {
		return nil, &fileError{name, problems}
	}
	return defs, nil
}

// parseJobs decodes `jobs: [...]`. YAMLToJSONStrict refuses a key written twice in one
// mapping, which YAML forbids and which would otherwise keep one of the two silently.
func parseJobs(data []byte) ([]definition.Definition, []string) {
	j, err := yaml.YAMLToJSONStrict(data)
	if err != nil {
		return nil, []string{"not valid YAML: " + strings.TrimPrefix(err.Error(), "error converting YAML to JSON: ")}
	}
	var top map[string]json.RawMessage
	switch {
	case string(j) == "null":
		return nil, []string{"empty: " + fileShape}
	case json.Unmarshal(j, &top) != nil || top == nil:
		return nil, []string{fileShape}
	}
	var problems []string
	for _, k := range slices.Sorted(maps.Keys(top)) {
		if k != "jobs" {
			problems = append(problems, fmt.Sprintf("unknown key %q at the top: %s", k, fileShape))
		}
	}
	var items []json.RawMessage
	switch raw, ok := top["jobs"]; {
	case !ok || string(raw) == "null":
		return nil, append(problems, "no jobs: "+fileShape)
	case json.Unmarshal(raw, &items) != nil:
		return nil, append(problems, "jobs: want a list of job definitions, "+fileShape)
	case len(items) == 0:
		// With --prune, an empty list would delete every runtime job.
		return nil, append(problems, "jobs: the list is empty; to delete a job, run scheduler delete NAME")
	}

	defs := make([]definition.Definition, 0, len(items))
	first := map[string]int{} // name → index of the first job with it
	for i, item := range items {
		where := fmt.Sprintf("jobs[%d]", i)
		if !bytes.HasPrefix(item, []byte("{")) {
			problems = append(problems, where+": want a mapping of a job's keys (name, schedule, http or sql, ...)")
			continue
		}
		var probe struct {
			Name string `json:"name"`
		}
		probeErr := json.Unmarshal(item, &probe)
		if probe.Name != "" {
			where += " (" + probe.Name + ")"
		}
		var tree any
		_ = json.Unmarshal(item, &tree)
		unknown := unknownKeys(tree, reflect.TypeFor[definition.Definition](), "")
		for _, k := range unknown {
			problems = append(problems, fmt.Sprintf("%s: unknown key %q", where, k))
		}
		d, err := definition.Decode(item)
		if err != nil && (len(unknown) == 0 || !strings.Contains(err.Error(), "json: unknown field")) {
			problems = append(problems, where+": "+decodeProblem(err))
		}
		switch {
		case probeErr != nil: // the name is not a string: Decode said so
		case probe.Name == "":
			problems = append(problems, where+": name is required (e.g. name: daily-report)")
		default:
			if at, dup := first[probe.Name]; dup {
				problems = append(problems, fmt.Sprintf("%s: jobs[%d] has this name too; a name defines one job", where, at))
			} else {
				first[probe.Name] = i
			}
		}
		defs = append(defs, d)
	}
	return defs, problems
}

// unknownKeys lists every key of v that the type t has no field for, with its path
// ("http.urll"): definition.Decode refuses the first one, without its path. Keys match as
// encoding/json matches them, regardless of case, so this adds paths and refuses nothing
// that Decode takes.
func unknownKeys(v any, t reflect.Type, prefix string) []string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	obj, ok := v.(map[string]any)
	if !ok || t.Kind() != reflect.Struct {
		// A map (labels, headers) takes any key; a value of the wrong type is Decode's to report.
		return nil
	}
	var out []string
	for _, k := range slices.Sorted(maps.Keys(obj)) {
		if f, ok := jsonField(t, k); ok {
			out = append(out, unknownKeys(obj[k], f.Type, prefix+k+".")...)
		} else {
			out = append(out, prefix+k)
		}
	}
	return out
}

// jsonField is the field of struct type t that encoding/json decodes key into.
func jsonField(t reflect.Type, key string) (reflect.StructField, bool) {
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if f.IsExported() && name != "-" && strings.EqualFold(cmp.Or(name, f.Name), key) {
			return f, true
		}
	}
	return reflect.StructField{}, false
}

// decodeProblem says in YAML's words what definition.Decode refused.
func decodeProblem(err error) string {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		if te.Field == "" {
			return "want a mapping of a job's keys (name, schedule, http or sql, ...), not " + valueKind(te.Value)
		}
		return fmt.Sprintf("%s: want %s, not %s", te.Field, wantKind(te.Type), valueKind(te.Value))
	}
	msg := strings.TrimPrefix(err.Error(), "the definition is not valid JSON of a job: ")
	return strings.TrimPrefix(msg, "json: ")
}

// valueKind names a JSON value's type (json.UnmarshalTypeError.Value) as YAML calls it.
func valueKind(v string) string {
	switch {
	case v == "object":
		return "a mapping"
	case v == "array":
		return "a list"
	case v == "bool":
		return "true or false"
	case strings.HasPrefix(v, "number"):
		return "a number"
	case v == "string":
		return "a string"
	}
	return v
}

func wantKind(t reflect.Type) string {
	switch t.Kind() {
	case reflect.String:
		return "a string (quote it)"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return "a whole number"
	case reflect.Bool:
		return "true or false"
	case reflect.Slice, reflect.Array:
		return "a list"
	default:
		return "a mapping"
	}
}

// fieldChange is one field a dry run would change: From or To is nil when the field is
// absent on that side.
type fieldChange struct {
	Field string `json:"field"`
	From  any    `json:"from"`
	To    any    `json:"to"`
}

// diffDefinitions compares two definitions field by field ("http.headers.X-Team"), in the
// order the server writes them; fields that only the current one has come last.
func diffDefinitions(from, to json.RawMessage) ([]fieldChange, error) {
	a, err := leaves(from)
	if err != nil {
		return nil, fmt.Errorf("read the current definition: %w", err)
	}
	b, err := leaves(to)
	if err != nil {
		return nil, fmt.Errorf("read the new definition: %w", err)
	}
	old := make(map[string]any, len(a))
	for _, l := range a {
		old[l.path] = l.value
	}
	var out []fieldChange
	seen := make(map[string]bool, len(b))
	for _, l := range b {
		seen[l.path] = true
		if o, ok := old[l.path]; !ok || renderValue(o) != renderValue(l.value) {
			out = append(out, fieldChange{Field: l.path, From: plain(o), To: plain(l.value)})
		}
	}
	for _, l := range a {
		if !seen[l.path] {
			out = append(out, fieldChange{Field: l.path, From: plain(l.value)})
		}
	}
	return out, nil
}

type leaf struct {
	path  string
	value any
}

// leaves flattens a JSON object into its scalar and list values, each with its dotted path.
func leaves(raw json.RawMessage) ([]leaf, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	v, err := orderedJSON(raw)
	if err != nil {
		return nil, err
	}
	var out []leaf
	var walk func(path string, v any)
	walk = func(path string, v any) {
		m, ok := v.(yamlv2.MapSlice)
		if !ok || len(m) == 0 {
			out = append(out, leaf{path, v})
			return
		}
		for _, it := range m {
			k := it.Key.(string)
			if path != "" {
				k = path + "." + k
			}
			walk(k, it.Value)
		}
	}
	walk("", v)
	return out, nil
}

// renderValue writes a definition's value for a diff line: strings quoted, lists and
// mappings inline, an absent value as (none).
func renderValue(v any) string {
	switch v := v.(type) {
	case nil:
		return "(none)"
	case string:
		return strconv.Quote(v)
	case []any:
		parts := make([]string, len(v))
		for i, e := range v {
			parts[i] = renderValue(e)
		}
		return "[" + strings.Join(parts, ", ") + "]"
	case yamlv2.MapSlice:
		parts := make([]string, len(v))
		for i, it := range v {
			parts[i] = fmt.Sprintf("%v: %s", it.Key, renderValue(it.Value))
		}
		return "{" + strings.Join(parts, ", ") + "}"
	case map[string]any:
		keys := slices.Sorted(maps.Keys(v))
		parts := make([]string, len(keys))
		for i, k := range keys {
			parts[i] = k + ": " + renderValue(v[k])
		}
		return "{" + strings.Join(parts, ", ") + "}"
	default:
		return fmt.Sprint(v)
	}
}

// plain turns ordered mappings back into maps, for -o json.
func plain(v any) any {
	switch v := v.(type) {
	case yamlv2.MapSlice:
		m := make(map[string]any, len(v))
		for _, it := range v {
			m[fmt.Sprint(it.Key)] = plain(it.Value)
		}
		return m
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = plain(e)
		}
		return out
	}
	return v
}

// orderedJSON decodes JSON keeping the order of each object's keys (yaml.v2's MapSlice,
// which sigs.k8s.io/yaml builds on), so that a definition reads in the order the API writes
// it, name first; whole numbers stay integers.
func orderedJSON(raw []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	return orderedValue(dec)
}

func orderedValue(dec *json.Decoder) (any, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch t := tok.(type) {
	case json.Delim:
		if t == '[' {
			list := []any{}
			for dec.More() {
				v, err := orderedValue(dec)
				if err != nil {
					return nil, err
				}
				list = append(list, v)
			}
			_, err := dec.Token()
			return list, err
		}
		m := yamlv2.MapSlice{}
		for dec.More() {
			k, err := dec.Token()
			if err != nil {
				return nil, err
			}
			v, err := orderedValue(dec)
			if err != nil {
				return nil, err
			}
			m = append(m, yamlv2.MapItem{Key: k, Value: v})
		}
		_, err := dec.Token()
		return m, err
	case json.Number:
		if i, err := t.Int64(); err == nil {
			return i, nil
		}
		return t.Float64()
	}
	return tok, nil
}

func getFlags(*flag.FlagSet) func(context.Context, *cli, []string) int {
	return func(ctx context.Context, x *cli, args []string) int {
		var v jobView
		if _, err := x.c.do(ctx, "GET", jobPath(args[0]), nil, nil, nil, &v); err != nil {
			return x.fail(ctx, err)
		}
		if !v.runtime() || !v.hasDefinition() {
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

// definitionsYAML writes definitions as a file of jobs that apply reads back unchanged.
// yaml.v2 is the YAML that sigs.k8s.io/yaml reads with, so a string that YAML 1.1 would
// read as something else ("yes", "1:30") comes out quoted.
func definitionsYAML(defs ...json.RawMessage) ([]byte, error) {
	list := make([]any, len(defs))
	for i, d := range defs {
		v, err := orderedJSON(d)
		if err != nil {
			return nil, err
		}
		list[i] = v
	}
	return yamlv2.Marshal(yamlv2.MapSlice{{Key: "jobs", Value: list}})
}

func deleteFlags(*flag.FlagSet) func(context.Context, *cli, []string) int {
	return func(ctx context.Context, x *cli, args []string) int {
		if _, err := x.c.do(ctx, "DELETE", jobPath(args[0]), nil, nil, nil, nil); err != nil {
			if refused(err) {
				return x.fail(ctx, err)
			}
			// A job that is not there, or a built-in one, is a failure, not a usage
			// error: a script deleting a job twice should see it.
			fmt.Fprintf(x.stderr, "scheduler: %v\n", err)
			return exitFailure
		}
		if x.json {
			b, _ := json.Marshal(map[string]any{"name": args[0], "deleted": true})
			return x.printJSON(b)
		}
		fmt.Fprintf(x.stdout, "deleted %s\n", args[0])
		return exitOK
	}
}
