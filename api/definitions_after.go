package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/schedulerhq/scheduler/client"
	"github.com/schedulerhq/scheduler/internal/httpx"
	"github.com/schedulerhq/scheduler/internal/namespace"
	"github.com/schedulerhq/scheduler/internal/runtimejob"
	"github.com/schedulerhq/scheduler/internal/store"
)

// `after` in the API: a definition's parents are checked against its namespace's jobs (a
// missing parent, a cycle, a chain too long) with the rest of its problems, and again in the
// write's transaction under the definitions' lock, so that two writes cannot close a cycle
// together; a job that children name is deleted only when forced, with a reason.

// afterRefused is a write whose parents the check in its transaction refused.
type afterRefused struct{ fields []client.FieldError }

func (e *afterRefused) Error() string { return "the job's parents are refused" }

// afterProblems checks d's parents against its namespace's jobs, read from ex (under the
// definitions' lock when lock). A definition without parents, or whose parents' names are
// already wrong (reported by the definition's own check), has none here.
func afterProblems(ctx context.Context, ex store.Executor, d runtimejob.Definition, lock bool) ([]client.FieldError, error) {
	if len(d.After) == 0 || len(d.After) > runtimejob.MaxParents || !namespace.Valid(d.Name) {
		return nil, nil
	}
	for _, p := range d.After {
		if !namespace.Valid(p) || p == d.Name {
			return nil, nil
		}
	}
	graph, err := ex.AfterGraph(ctx, namespace.Of(d.Key()), lock)
	if err != nil {
		return nil, err
	}
	var fields []client.FieldError
	for _, e := range runtimejob.AfterGraph(d.Key(), d.Parents(), graph) {
		fields = append(fields, client.FieldError{Field: e.Field, Detail: e.Message})
	}
	return fields, nil
}

// checkAfterInTx is afterProblems inside the write's transaction, under the lock: the
// graph read before it may have changed since.
func checkAfterInTx(ctx context.Context, ex store.Executor, d runtimejob.Definition) error {
	fields, err := afterProblems(ctx, ex, d, true)
	if err != nil {
		return err
	}
	if len(fields) > 0 {
		return &afterRefused{fields: fields}
	}
	return nil
}

// writeAfterRefused answers a write whose parents the transaction's check refused, as
// checkDefinition answers any other problem of the definition.
func writeAfterRefused(w http.ResponseWriter, r *http.Request, err error) bool {
	var refused *afterRefused
	if !errors.As(err, &refused) {
		return false
	}
	httpx.WriteProblem(w, r, http.StatusUnprocessableEntity, probInvalidDefinition,
		fmt.Sprintf("the job definition has %d problems with its parents; see errors", len(refused.fields)), refused.fields...)
	return true
}

// hasChildren is a delete of a job that children name, not forced. A forced one leaves
// its children naming it: they wait for a job of that name (docs/runtime-jobs.md).
type hasChildren struct{ children []string }

func (e *hasChildren) Error() string { return "jobs name this job in after" }

// parseForce reads ?force=, which a delete of a job that children name needs, with a reason.
func parseForce(w http.ResponseWriter, r *http.Request, q url.Values, reason *string) (bool, bool) {
	v := q.Get("force")
	if v == "" {
		return false, true
	}
	force, err := strconv.ParseBool(v)
	switch {
	case err != nil:
		httpx.FieldProblem(w, r, httpx.ProbInvalidRequest, "force", fmt.Sprintf("force must be true or false; got %q", v))
		return false, false
	case force && reason == nil:
		httpx.FieldProblem(w, r, httpx.ProbInvalidRequest, reasonHeader,
			"a forced delete needs a reason: send it in X-Reason (percent-encoded), e.g. X-Reason: extract%20replaced%20by%20ingest")
		return false, false
	}
	return force, true
}

// writeHasChildren answers 409 naming the children.
func writeHasChildren(w http.ResponseWriter, r *http.Request, key string, err error) bool {
	var has *hasChildren
	if !errors.As(err, &has) {
		return false
	}
	names := make([]string, len(has.children))
	for i, c := range has.children {
		_, names[i] = namespace.Split(c)
	}
	httpx.WriteProblem(w, r, http.StatusConflict, probJobHasChildren, fmt.Sprintf(
		"%s is a parent of %s (after); remove it from their after first, or delete it anyway with ?force=true and an X-Reason: they then wait for a job of this name",
		key, strings.Join(names, ", ")), client.FieldError{Field: "after", Detail: "named by " + strings.Join(names, ", ")})
	return true
}
