package httpx

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/schedulerhq/scheduler/client"
)

// Endpoint turns a typed function into a route's handler, so a handler says what it does
// and not how a request is read or an answer written. For each request it
//
//   - makes a zero Req and, when Req has an Extract(*http.Request) error method, lets it
//     read the path, query and headers it needs;
//   - with Body set, reads the body (capped by the router, JSON only) and decodes it
//     strictly into Req; an empty body leaves Req's members as they are;
//   - when Req has a Validate() error method, calls it;
//   - calls fn with the request's context, bounded by Timeout when that is set;
//   - answers Status (200 when 0) with *Resp in JSON, or with no body when fn returns nil.
//     A Resp with a SetHeader(http.Header) method adds its headers first, and one with a
//     StatusCode() int method that returns more than 0 answers that status instead.
//
// An error from any step that is a *client.Problem is answered as it is, its Instance and
// RequestID filled from the request; any other error goes to OnError (a 500 when nil).
type Endpoint[Req, Resp any] struct {
	Status  int
	Body    bool
	Timeout time.Duration
	OnError func(http.ResponseWriter, *http.Request, error)
	Fn      func(ctx context.Context, req *Req) (*Resp, error)
}

// Extractor is a Req that reads the path, query or headers.
type Extractor interface{ Extract(r *http.Request) error }

// Validator is a Req that checks itself once read.
type Validator interface{ Validate() error }

// HeaderSetter is a Resp that sets headers of its answer.
type HeaderSetter interface{ SetHeader(h http.Header) }

// StatusCoder is a Resp whose status depends on what happened (200 or 202, 200 or 201).
type StatusCoder interface{ StatusCode() int }

// Problem is a problem for Endpoint to answer, about whichever request it answers.
func Problem(status int, pt ProblemType, detail string, fields ...client.FieldError) *client.Problem {
	return &client.Problem{Type: client.ProblemBase + pt.Slug, Title: pt.Title, Status: status, Detail: detail, Errors: fields}
}

// WriteProblemFor answers p, a Problem made without the request, as one about r.
func WriteProblemFor(w http.ResponseWriter, r *http.Request, p *client.Problem) {
	q := *p
	q.Instance, q.RequestID = r.URL.Path, RequestID(r.Context())
	WriteProblemBody(w, &q)
}

// ServeHTTP answers one request; see Endpoint.
func (e Endpoint[Req, Resp]) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	resp, err := e.serve(w, r)
	if err != nil {
		e.fail(w, r, err)
		return
	}
	status := e.Status
	if status == 0 {
		status = http.StatusOK
	}
	if resp == nil {
		w.WriteHeader(status)
		return
	}
	if hs, ok := any(resp).(HeaderSetter); ok {
		hs.SetHeader(w.Header())
	}
	if sc, ok := any(resp).(StatusCoder); ok && sc.StatusCode() > 0 {
		status = sc.StatusCode()
	}
	WriteJSON(w, status, resp)
}

func (e Endpoint[Req, Resp]) serve(w http.ResponseWriter, r *http.Request) (*Resp, error) {
	req := new(Req)
	if ex, ok := any(req).(Extractor); ok {
		if err := ex.Extract(r); err != nil {
			return nil, err
		}
	}
	if e.Body {
		if err := decodeBody(r, req); err != nil {
			return nil, err
		}
	}
	if v, ok := any(req).(Validator); ok {
		if err := v.Validate(); err != nil {
			return nil, err
		}
	}
	ctx := r.Context()
	if e.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, e.Timeout)
		defer cancel()
	}
	return e.Fn(ctx, req)
}

// WithHeader is err, answered with the header key set to value (a problem's Retry-After
// or Location).
func WithHeader(err error, key, value string) error {
	return &headerError{err: err, key: key, value: value}
}

type headerError struct {
	err        error
	key, value string
}

func (e *headerError) Error() string { return e.err.Error() }
func (e *headerError) Unwrap() error { return e.err }

func (e Endpoint[Req, Resp]) fail(w http.ResponseWriter, r *http.Request, err error) {
	for he := (*headerError)(nil); errors.As(err, &he); err = he.err {
		w.Header().Set(he.key, he.value)
	}
	var p *client.Problem
	switch {
	case errors.As(err, &p):
		WriteProblemFor(w, r, p)
	case e.OnError != nil:
		e.OnError(w, r, err)
	default:
		WriteProblem(w, r, http.StatusInternalServerError, ProbInternal, "the request failed inside the replica; report it with its request_id")
	}
}
