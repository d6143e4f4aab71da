package api

import (
	"context"
	"net/http"

	"github.com/schedulerhq/scheduler/client"
	"github.com/schedulerhq/scheduler/internal/httpx"
)

// endpoint is a typed route (httpx.Endpoint) with the API's bounds: the call gets
// queryTimeout, and an error that is not a problem is the database's (503, databaseProblem).
// e.Fn, e.Status and e.Body are the route's.
func endpoint[Req, Resp any](s *Server, e httpx.Endpoint[Req, Resp]) http.HandlerFunc {
	e.Timeout, e.OnError = queryTimeout, s.databaseProblem
	return e.ServeHTTP
}

// get is endpoint for a route that reads no body and answers 200.
func get[Req, Resp any](s *Server, fn func(context.Context, *Req) (*Resp, error)) http.HandlerFunc {
	return endpoint(s, httpx.Endpoint[Req, Resp]{Fn: fn})
}

// act is endpoint for a route that takes a JSON body (all of its members optional) and
// answers status.
func act[Req, Resp any](s *Server, status int, fn func(context.Context, *Req) (*Resp, error)) http.HandlerFunc {
	return endpoint(s, httpx.Endpoint[Req, Resp]{Status: status, Body: true, Fn: fn})
}

// routed is the part of an endpoint's request that keeps the HTTP request itself, for what
// only it says: the caller's address in an audit row, the route's parameters.
type routed struct{ r *http.Request }

// Extract keeps r.
func (q *routed) Extract(r *http.Request) error {
	q.r = r
	return nil
}

// reasonRequest is an action's optional body, {"reason": "..."} (client.ReasonRequest), with
// the request.
type reasonRequest struct {
	routed
	client.ReasonRequest
	// reason is Validate's: the reason to record, nil for none.
	reason *string
}

// Validate refuses a reason the audit log cannot hold, and reads "" as none.
func (q *reasonRequest) Validate() error {
	reason, p := validReason(&q.ReasonRequest.Reason)
	q.reason = reason
	if p != nil {
		return p
	}
	return nil
}

// validReason is checkReason's verdict: the reason to record, or the 400 to answer.
func validReason(reason *string) (*string, *client.Problem) {
	if reason != nil && *reason == "" {
		return nil, nil
	}
	if p := reasonProblem(reason); p != "" {
		return nil, httpx.Problem(http.StatusBadRequest, httpx.ProbInvalidRequest, p, client.FieldError{Field: "reason", Detail: p})
	}
	return reason, nil
}
