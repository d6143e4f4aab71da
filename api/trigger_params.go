package api

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/schedulerhq/scheduler/client"
	"github.com/schedulerhq/scheduler/internal/httpx"
	"github.com/schedulerhq/scheduler/internal/jobcontract"
	"github.com/schedulerhq/scheduler/internal/runtimejob"
	"github.com/schedulerhq/scheduler/internal/store"
)

// A trigger's params: inputs of one run, untrusted like a definition, checked at once.

// Bounds of a trigger's inputs.
const (
	maxParamVars     = 32
	maxParamVarBytes = 4 << 10
	maxParamHeaders  = 32
	maxParamBody     = 32 << 10 // the request's body is capped at 64 KiB, JSON escaping included
)

var paramVarRE = regexp.MustCompile(`^[a-z_][a-z0-9_]{0,62}$`)

// checkParams lists every wrong member of p for job j: vars are a SQL job's, body and
// headers an HTTP job's, and no header may stand in for one the scheduler sets itself.
func checkParams(j *jobRef, p jobcontract.Params) []client.FieldError {
	var fields []client.FieldError
	fail := func(field, format string, args ...any) {
		fields = append(fields, client.FieldError{Field: field, Detail: fmt.Sprintf(format, args...)})
	}
	kind := ""
	if j.def != nil {
		kind = j.def.Kind()
	}
	if len(p.Vars) > 0 && kind != runtimejob.KindSQL {
		fail("params.vars", "vars are the inputs of a SQL job (current_setting('scheduler.var.<name>')); %s is not one", j.conf.Name)
	}
	if (p.Body != nil || len(p.Headers) > 0) && kind != runtimejob.KindHTTP {
		fail("params.body", "body and headers are the inputs of an HTTP job; %s is not one", j.conf.Name)
	}
	if len(p.Vars) > maxParamVars {
		fail("params.vars", "%d vars; at most %d", len(p.Vars), maxParamVars)
	}
	for _, name := range slices.Sorted(maps.Keys(p.Vars)) {
		v := p.Vars[name]
		switch {
		case !paramVarRE.MatchString(name):
			fail("params.vars."+name, "a var's name is 1 to 63 lower-case letters, digits and _, starting with a letter or _")
		case len(v) > maxParamVarBytes || !utf8.ValidString(v) || strings.ContainsRune(v, 0):
			fail("params.vars."+name, "at most %d bytes of UTF-8 text without NUL", maxParamVarBytes)
		}
	}
	if p.Body != nil && (len(*p.Body) > maxParamBody || !utf8.ValidString(*p.Body) || strings.ContainsRune(*p.Body, 0)) {
		fail("params.body", "at most %d bytes of UTF-8 text without NUL (\\u0000, which PostgreSQL cannot store)", maxParamBody)
	}
	if len(p.Headers) > maxParamHeaders {
		fail("params.headers", "%d headers; at most %d", len(p.Headers), maxParamHeaders)
	}
	for _, name := range slices.Sorted(maps.Keys(p.Headers)) {
		v, lower := p.Headers[name], strings.ToLower(name)
		switch {
		case !runtimejob.ValidHeaderName(name):
			fail("params.headers."+name, "%s", runtimejob.HeaderNameWant)
		case strings.HasPrefix(lower, "x-scheduler-") || lower == "authorization" || slices.Contains(runtimejob.ReservedHeaders, lower):
			fail("params.headers."+name, "the scheduler sets %s itself (keys, signatures, its own headers and the job's auth); a trigger cannot", name)
		case len(v) > maxParamVarBytes:
			fail("params.headers."+name, "at most %d bytes", maxParamVarBytes)
		case runtimejob.HeaderValueProblem(v) != "":
			fail("params.headers."+name, "%s", runtimejob.HeaderValueProblem(v))
		}
	}
	return fields
}

// answersParams reports whether the job's active run answers a trigger with params p: a
// trigger without inputs takes whatever run is active, one with inputs only a run that has
// the very same (its body, headers, vars and dry_run).
func answersParams(active *store.Run, p jobcontract.Params) bool {
	if !p.DryRun && len(p.Vars) == 0 && p.Body == nil && len(p.Headers) == 0 {
		return true
	}
	theirs, err := jobcontract.ParseParams(active.Params)
	if err != nil {
		return false
	}
	a, _ := json.Marshal(theirs) // maps marshal in key order: equal inputs, equal bytes
	b, _ := json.Marshal(p)
	return bytes.Equal(a, b)
}

// activeRunProblem refuses a trigger whose params the job's active run does not have: 409
// with that run's id (and Location), and the ways on.
func activeRunProblem(w http.ResponseWriter, r *http.Request, j *jobRef, active *store.Run) {
	id := strconv.FormatInt(active.ID, 10)
	overlap := "" // a built-in job's runs never overlap
	if j.def != nil {
		overlap = `, or let runs of the job overlap ("overlap": "allow" with "max_concurrent" of 2 or more)`
	}
	w.Header().Set("Location", "/v1/runs/"+id)
	p := httpx.NewProblem(r, http.StatusConflict, probRunActive,
		fmt.Sprintf("job %s already has a %s run, %s, with other params than this trigger's; nothing was queued, so these inputs are not lost in it. "+
			"Wait for run %s to end (GET /v1/runs/%s) and trigger again, cancel it (POST /v1/runs/%s/cancel)%s",
			j.conf.Name, active.Status, id, id, id, id, overlap))
	p.ActiveRunID = active.ID
	httpx.WriteProblemBody(w, p)
}
