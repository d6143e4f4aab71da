// Package httpx is the API's generic HTTP plumbing: problem+json answers, strict capped
// JSON bodies, query parameters, conditional GET and compression, and Endpoint, which turns
// a typed function into a handler. It knows nothing of jobs or runs; package api holds
// those, and the wire types both sides share are package client's.
package httpx

import (
	"context"
	"encoding/json"
	"net/http"

	"github.com/schedulerhq/scheduler/client"
)

// ProblemType is a problem's stable identifier (client.ProblemBase + Slug), which clients
// branch on, with the title it always carries.
type ProblemType struct {
	Slug, Title string
}

// The problem types of the plumbing itself; package api declares its own.
var (
	ProbInvalidRequest   = ProblemType{"invalid-request", "The request is invalid"}
	ProbInvalidJSON      = ProblemType{"invalid-json", "The request body is not valid JSON for this route"}
	ProbBodyTooLarge     = ProblemType{"body-too-large", "The request body is too large"}
	ProbUnsupportedMedia = ProblemType{"unsupported-media-type", "The request body must be application/json"}
	ProbInternal         = ProblemType{"internal", "Internal error"}
)

type requestIDKey struct{}

// WithRequestID returns ctx carrying the request's id, which every problem names.
func WithRequestID(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, requestIDKey{}, id)
}

// RequestID returns the request's id ("" outside a request).
func RequestID(ctx context.Context) string {
	id, _ := ctx.Value(requestIDKey{}).(string)
	return id
}

// NewProblem is the problem pt with status and detail, about the request r.
func NewProblem(r *http.Request, status int, pt ProblemType, detail string, fields ...client.FieldError) *client.Problem {
	return &client.Problem{
		Type:      client.ProblemBase + pt.Slug,
		Title:     pt.Title,
		Status:    status,
		Detail:    detail,
		Instance:  r.URL.Path,
		RequestID: RequestID(r.Context()),
		Errors:    fields,
	}
}

// WriteProblem answers with an application/problem+json body; fields, when given, are the
// offending request fields.
func WriteProblem(w http.ResponseWriter, r *http.Request, status int, pt ProblemType, detail string, fields ...client.FieldError) {
	WriteProblemBody(w, NewProblem(r, status, pt, detail, fields...))
}

// WriteProblemBody answers p as it is.
func WriteProblemBody(w http.ResponseWriter, p *client.Problem) {
	w.Header().Set("Content-Type", "application/problem+json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(p.Status)
	_ = json.NewEncoder(w).Encode(p)
}

// FieldProblem is a 400 about one request field.
func FieldProblem(w http.ResponseWriter, r *http.Request, pt ProblemType, field, detail string) {
	WriteProblem(w, r, http.StatusBadRequest, pt, detail, client.FieldError{Field: field, Detail: detail})
}
