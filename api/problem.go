package api

import (
	"encoding/json"
	"net/http"
)

// problemBase prefixes every problem type. The types are stable identifiers that clients
// branch on (RFC 9457); title and detail are for people and may change.
const problemBase = "https://scheduler.dev/problems/"

// Problem types, each with the title it always carries.
var (
	probInvalidRequest      = problemType{"invalid-request", "The request is invalid"}
	probInvalidJSON         = problemType{"invalid-json", "The request body is not valid JSON for this route"}
	probBodyTooLarge        = problemType{"body-too-large", "The request body is too large"}
	probUnsupportedMedia    = problemType{"unsupported-media-type", "The request body must be application/json"}
	probInvalidKey          = problemType{"invalid-idempotency-key", "The Idempotency-Key header is not a UUID v4"}
	probKeyReused           = problemType{"idempotency-key-reused", "The Idempotency-Key was used with another request"}
	probKeyInProgress       = problemType{"idempotency-key-in-progress", "A request with this Idempotency-Key is still in progress"}
	probInvalidCursor       = problemType{"invalid-cursor", "The cursor is invalid"}
	probUnauthorized        = problemType{"unauthorized", "A valid bearer token is required"}
	probReadOnly            = problemType{"read-only-token", "This token may only read"}
	probForbidden           = problemType{"forbidden", "This token may not do this"}
	probAuthUnavailable     = problemType{"auth-unavailable", "The token could not be checked"}
	probNamespaceNotFound   = problemType{"namespace-not-found", "No such namespace"}
	probNamespaceQuota      = problemType{"namespace-quota", "The namespace's quota is reached"}
	probTokenNotFound       = problemType{"token-not-found", "No such token"}
	probBackfillRunning     = problemType{"backfill-running", "A backfill of this job is running"}
	probBackfillEnded       = problemType{"backfill-ended", "The backfill has already ended"}
	probRunNotASlot         = problemType{"run-not-a-slot", "The run's slot cannot be run again"}
	probJobBusy             = problemType{"job-busy", "The job has an active run"}
	probCrossOrigin         = problemType{"cross-origin", "Cross-site requests may not act"}
	probHostNotAllowed      = problemType{"host-not-allowed", "This replica does not answer for this host name"}
	probJobNotFound         = problemType{"job-not-found", "No such job"}
	probRunNotFound         = problemType{"run-not-found", "No such run"}
	probNotFound            = problemType{"not-found", "No such route"}
	probMethodNotAllowed    = problemType{"method-not-allowed", "Method not allowed on this route"}
	probJobDisabled         = problemType{"job-disabled", "The job is disabled"}
	probRunFinished         = problemType{"run-finished", "The run has already finished"}
	probRunActive           = problemType{"run-active", "The job's active run has other params"}
	probNoLeader            = problemType{"no-leader", "No replica has been elected leader yet"}
	probInvalidDefinition   = problemType{"invalid-definition", "The job definition is invalid"}
	probJobExists           = problemType{"job-exists", "A job with this name exists"}
	probBuiltinJob          = problemType{"builtin-job", "Built-in jobs cannot be replaced or deleted"}
	probVersionMismatch     = problemType{"version-mismatch", "The job's version is not the one If-Match names"}
	probTooManyJobs         = problemType{"too-many-jobs", "The scheduler holds its maximum number of runtime jobs"}
	probDatabaseUnavailable = problemType{"database-unavailable", "The database did not answer"}
	probInternal            = problemType{"internal", "Internal error"}
)

type problemType struct {
	slug, title string
}

// FieldError names the request field a problem is about: a query parameter, a header or a
// JSON member of the body.
type FieldError struct {
	Field  string `json:"field"`
	Detail string `json:"detail"`
}

// problem is an RFC 9457 problem details body.
type problem struct {
	Type      string       `json:"type"`
	Title     string       `json:"title"`
	Status    int          `json:"status"`
	Detail    string       `json:"detail"`
	Instance  string       `json:"instance,omitempty"`
	RequestID string       `json:"request_id,omitempty"`
	Errors    []FieldError `json:"errors,omitempty"`
}

// writeProblem answers with an application/problem+json body. field, when not empty, is the
// offending request field.
func writeProblem(w http.ResponseWriter, r *http.Request, status int, pt problemType, detail string, fields ...FieldError) {
	p := problem{
		Type:      problemBase + pt.slug,
		Title:     pt.title,
		Status:    status,
		Detail:    detail,
		Instance:  r.URL.Path,
		RequestID: requestID(r.Context()),
		Errors:    fields,
	}
	w.Header().Set("Content-Type", "application/problem+json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(p)
}

// fieldProblem is a 400 about one request field.
func fieldProblem(w http.ResponseWriter, r *http.Request, pt problemType, field, detail string) {
	writeProblem(w, r, http.StatusBadRequest, pt, detail, FieldError{Field: field, Detail: detail})
}
