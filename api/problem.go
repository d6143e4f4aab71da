package api

import "github.com/schedulerhq/scheduler/internal/httpx"

// The API's problem types, each with the title it always carries; the generic ones (an
// invalid request or body) are httpx's. The types are stable identifiers that clients branch
// on (RFC 9457); title and detail are for people and may change.
var (
	probInvalidKey          = httpx.ProblemType{Slug: "invalid-idempotency-key", Title: "The Idempotency-Key header is not a UUID v4"}
	probKeyReused           = httpx.ProblemType{Slug: "idempotency-key-reused", Title: "The Idempotency-Key was used with another request"}
	probKeyInProgress       = httpx.ProblemType{Slug: "idempotency-key-in-progress", Title: "A request with this Idempotency-Key is still in progress"}
	probInvalidCursor       = httpx.ProblemType{Slug: "invalid-cursor", Title: "The cursor is invalid"}
	probUnauthorized        = httpx.ProblemType{Slug: "unauthorized", Title: "A valid bearer token is required"}
	probReadOnly            = httpx.ProblemType{Slug: "read-only-token", Title: "This token may only read"}
	probForbidden           = httpx.ProblemType{Slug: "forbidden", Title: "This token may not do this"}
	probAuthUnavailable     = httpx.ProblemType{Slug: "auth-unavailable", Title: "The token could not be checked"}
	probNamespaceNotFound   = httpx.ProblemType{Slug: "namespace-not-found", Title: "No such namespace"}
	probNamespaceQuota      = httpx.ProblemType{Slug: "namespace-quota", Title: "The namespace's quota is reached"}
	probTokenNotFound       = httpx.ProblemType{Slug: "token-not-found", Title: "No such token"}
	probBackfillRunning     = httpx.ProblemType{Slug: "backfill-running", Title: "A backfill of this job is running"}
	probBackfillEnded       = httpx.ProblemType{Slug: "backfill-ended", Title: "The backfill has already ended"}
	probRunNotASlot         = httpx.ProblemType{Slug: "run-not-a-slot", Title: "The run's slot cannot be run again"}
	probJobBusy             = httpx.ProblemType{Slug: "job-busy", Title: "The job has an active run"}
	probCrossOrigin         = httpx.ProblemType{Slug: "cross-origin", Title: "Cross-site requests may not act"}
	probHostNotAllowed      = httpx.ProblemType{Slug: "host-not-allowed", Title: "This replica does not answer for this host name"}
	probJobNotFound         = httpx.ProblemType{Slug: "job-not-found", Title: "No such job"}
	probRunNotFound         = httpx.ProblemType{Slug: "run-not-found", Title: "No such run"}
	probNotFound            = httpx.ProblemType{Slug: "not-found", Title: "No such route"}
	probMethodNotAllowed    = httpx.ProblemType{Slug: "method-not-allowed", Title: "Method not allowed on this route"}
	probJobDisabled         = httpx.ProblemType{Slug: "job-disabled", Title: "The job is disabled"}
	probRunFinished         = httpx.ProblemType{Slug: "run-finished", Title: "The run has already finished"}
	probRunActive           = httpx.ProblemType{Slug: "run-active", Title: "The job's active run has other params"}
	probNoLeader            = httpx.ProblemType{Slug: "no-leader", Title: "No replica has been elected leader yet"}
	probInstanceNotFound    = httpx.ProblemType{Slug: "instance-not-found", Title: "No such replica"}
	probInvalidDefinition   = httpx.ProblemType{Slug: "invalid-definition", Title: "The job definition is invalid"}
	probJobExists           = httpx.ProblemType{Slug: "job-exists", Title: "A job with this name exists"}
	probBuiltinJob          = httpx.ProblemType{Slug: "builtin-job", Title: "Built-in jobs cannot be replaced or deleted"}
	probVersionMismatch     = httpx.ProblemType{Slug: "version-mismatch", Title: "The job's version is not the one If-Match names"}
	probTooManyJobs         = httpx.ProblemType{Slug: "too-many-jobs", Title: "The scheduler holds its maximum number of runtime jobs"}
	probJobHasChildren      = httpx.ProblemType{Slug: "job-has-children", Title: "Other jobs run after this job"}
	probDatabaseUnavailable = httpx.ProblemType{Slug: "database-unavailable", Title: "The database did not answer"}
)
