package main

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"reflect"
	"slices"
	"strings"

	"github.com/schedulerhq/scheduler/internal/namespace"
	"github.com/schedulerhq/scheduler/internal/runtimejob"
)

// Reading a file of jobs: YAML (JSON is YAML too) holding `jobs:` and a list of definitions
// with the API's keys, namespace: among them. Every problem of the file is found before
// anything is sent, each naming the job by its index and name, in YAML's words.

const (
	// maxJobsFile caps what apply reads; ten thousand jobs (SCHEDULER_MAX_JOBS) fit in it.
	maxJobsFile = 16 << 20
	// fileShape says what a file of jobs looks like, for the errors about its shape.
	fileShape = `a file holds "jobs:" and a list of job definitions, e.g. jobs: [{name: daily-report, schedule: "0 2 * * *", http: {url: "https://..."}}]`
)

// fileError is every problem of a file of jobs, found before anything is sent.
type fileError struct {
	file     string
	problems []string
}

func (e *fileError) Error() string { return e.file + ": " + strings.Join(e.problems, "; ") }

// readJobs reads a file of jobs ("-": stdin) and decodes every job, reporting every
// problem of the file at once: each names the job by its index and name. A job that names
// no namespace is in ns.
func readJobs(path string, stdin io.Reader, ns string) ([]runtimejob.Definition, error) {
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
	defs, problems := parseJobs(data, ns)
	if len(problems) > 0 {
		return nil, &fileError{name, problems}
	}
	return defs, nil
}

// parseJobs decodes `jobs: [...]`, each job in its namespace: the one it names, else ns.
// Namespace default is written as none, as the server stores it. yamlToJSON refuses a key
// written twice in one mapping, which YAML forbids and which would otherwise keep one of the
// two silently, and reads every key as a string (YAML 1.2: on: is a key).
func parseJobs(data []byte, ns string) ([]runtimejob.Definition, []string) {
	j, err := yamlToJSON(data)
	if err != nil {
		return nil, []string{yamlProblem(err)}
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

	defs := make([]runtimejob.Definition, 0, len(items))
	first := map[string]int{} // namespace.Key → index of the first job with it
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
		unknown := unknownKeys(tree, reflect.TypeFor[runtimejob.Definition](), "")
		for _, k := range unknown {
			problems = append(problems, where+": "+k.String())
		}
		d, err := runtimejob.Decode(item)
		if err != nil && (len(unknown) == 0 || !strings.Contains(err.Error(), "json: unknown field")) {
			problems = append(problems, where+": "+decodeProblem(err)+yamlBoolHint(err, tree))
		}
		d.Namespace = cmp.Or(d.Namespace, ns)
		if !namespace.Valid(d.Namespace) {
			problems = append(problems, fmt.Sprintf("%s: namespace: %q is not a namespace: want 1 to 63 lower-case letters, digits and '-' (e.g. billing)", where, d.Namespace))
		}
		if d.Namespace == namespace.Default {
			d.Namespace = ""
		}
		switch {
		case probeErr != nil: // the name is not a string: Decode said so
		case probe.Name == "":
			problems = append(problems, where+": name is required (e.g. name: daily-report)")
		default:
			key := namespace.Key(d.Namespace, probe.Name)
			if at, dup := first[key]; dup {
				problems = append(problems, fmt.Sprintf("%s: jobs[%d] has this name too; a name defines one job", where, at))
			} else {
				first[key] = i
			}
		}
		defs = append(defs, d)
	}
	return defs, problems
}

// unknownKey is a key of a file that its definition has no field for, with its path
// ("http.urll", "notify[0].webhok") and the known key nearest to it.
type unknownKey struct{ path, nearest string }

func (k unknownKey) String() string {
	if k.nearest == "" {
		return fmt.Sprintf("unknown key %q", k.path)
	}
	return fmt.Sprintf("unknown key %q: did you mean %q?", k.path, k.nearest)
}

// unknownKeys lists every key of v that the type t has no field for, at every depth, lists'
// items included: definition.Decode refuses the first one, without its path. Keys match as
// encoding/json matches them, regardless of case, so this adds paths and refuses nothing
// that Decode takes.
func unknownKeys(v any, t reflect.Type, path string) []unknownKey {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if list, ok := v.([]any); ok && (t.Kind() == reflect.Slice || t.Kind() == reflect.Array) {
		var out []unknownKey
		for i, e := range list {
			out = append(out, unknownKeys(e, t.Elem(), fmt.Sprintf("%s[%d]", path, i))...)
		}
		return out
	}
	obj, ok := v.(map[string]any)
	if !ok || t.Kind() != reflect.Struct {
		// A map (labels, headers) takes any key; a value of the wrong type is Decode's to report.
		return nil
	}
	prefix := path
	if prefix != "" {
		prefix += "."
	}
	var out []unknownKey
	for _, k := range slices.Sorted(maps.Keys(obj)) {
		if f, ok := jsonField(t, k); ok {
			out = append(out, unknownKeys(obj[k], f.Type, prefix+k)...)
		} else {
			out = append(out, unknownKey{prefix + k, nearestName(k, jsonNames(t))})
		}
	}
	return out
}

// jsonNames are the keys encoding/json decodes into struct type t.
func jsonNames(t reflect.Type) []string {
	var names []string
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if f.IsExported() && name != "-" {
			names = append(names, cmp.Or(name, f.Name))
		}
	}
	return names
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

// yamlBoolHint says what to write when a field that takes true or false got one of the words
// YAML 1.1 read as booleans (yes, no, on, off, y, n), which YAML 1.2 reads as strings.
func yamlBoolHint(err error, tree any) string {
	var te *json.UnmarshalTypeError
	if !errors.As(err, &te) || te.Type.Kind() != reflect.Bool || te.Value != "string" {
		return ""
	}
	v := tree
	for part := range strings.SplitSeq(te.Field, ".") {
		m, ok := v.(map[string]any)
		if !ok {
			return ""
		}
		v = m[part]
	}
	word, _ := v.(string)
	switch strings.ToLower(word) {
	case "yes", "y", "on":
		return fmt.Sprintf(" (%q is a string in YAML 1.2: write true)", word)
	case "no", "n", "off":
		return fmt.Sprintf(" (%q is a string in YAML 1.2: write false)", word)
	}
	return fmt.Sprintf(" (write true or false, unquoted, not %q)", word)
}
