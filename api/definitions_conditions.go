package api

import (
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/schedulerhq/scheduler/client"
	"github.com/schedulerhq/scheduler/internal/httpx"
)

// A definition write's conditions: If-Match names the version the job must be at, and
// ?dry_run asks what the write would do without doing it.

// ifMatch is a request's If-Match condition.
type ifMatch struct {
	given bool
	// version is the version the job must be at; 0 with given is "*" (any version: the
	// job must exist); noVersion is an entity tag that names no version.
	version int64
}

// noVersion can match no version (versions start at 1): the store answers it
// ErrVersionMismatch.
const noVersion = -1

// parseIfMatch reads If-Match: the job's version as an entity tag ("3"), also taken bare (3)
// or weak (W/"3") since clients copy it from X-Job-Version or the view's version; or "*".
// Another entity tag (such as the weak content ETag of a GET) matches no version, so the
// request fails its precondition (412); a value that is not an entity tag is a 400.
func parseIfMatch(w http.ResponseWriter, r *http.Request) (ifMatch, bool) {
	values := r.Header.Values("If-Match")
	if len(values) == 0 {
		return ifMatch{}, true
	}
	v := strings.TrimSpace(strings.Join(values, ","))
	if v == "*" {
		return ifMatch{given: true}, true
	}
	tag, weak := strings.CutPrefix(v, "W/")
	quoted := len(tag) >= 2 && tag[0] == '"' && tag[len(tag)-1] == '"' && !strings.Contains(tag[1:len(tag)-1], `"`)
	if quoted {
		tag = tag[1 : len(tag)-1]
	}
	n, err := strconv.ParseInt(tag, 10, 64)
	switch {
	case (quoted || !weak) && err == nil && n > 0:
		return ifMatch{given: true, version: n}, true
	case quoted:
		return ifMatch{given: true, version: noVersion}, true
	}
	httpx.FieldProblem(w, r, httpx.ProbInvalidRequest, "If-Match", fmt.Sprintf(
		`If-Match must name one version of the job, such as "3" (its ETag, X-Job-Version or version); got %q`, v))
	return ifMatch{}, false
}

// parseDryRun reads ?dry_run.
func parseDryRun(w http.ResponseWriter, r *http.Request, q url.Values) (bool, bool) {
	v := q.Get("dry_run")
	if v == "" {
		return false, true
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		httpx.FieldProblem(w, r, httpx.ProbInvalidRequest, "dry_run", fmt.Sprintf("dry_run must be true or false; got %q", v))
		return false, false
	}
	return b, true
}

// versionMismatch answers 412 naming the job's current version.
func versionMismatch(w http.ResponseWriter, r *http.Request, name string, current int64) {
	httpx.WriteProblem(w, r, http.StatusPreconditionFailed, probVersionMismatch, fmt.Sprintf(
		`job %s is at version %d, not the one If-Match names: it changed since you read it; GET it, apply your change again, and send If-Match: "%d"`,
		name, current, current), client.FieldError{Field: "If-Match", Detail: fmt.Sprintf(`the current version is "%d"`, current)})
}
