// Package client is a Go client of the scheduler's HTTP API (/v1), and the API's wire
// types: the scheduler encodes its answers with the types of this package, so what a
// Client decodes is what the server wrote.
//
// A Client sends each call to one replica (any replica answers every route); a refused
// call returns a *Problem (RFC 9457) with the status, the problem type to branch on
// (Problem.Slug) and the fields a request got wrong. The routes and their fields are
// described in the scheduler's OpenAPI document, GET /openapi.yaml.
package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
)

// Client calls one scheduler's API. Its zero value is not usable: make one with New.
type Client struct {
	base      string
	token     string
	namespace string
	http      *http.Client
}

// Option sets up a Client.
type Option func(*Client)

// WithToken sends token as "Authorization: Bearer <token>" with every call.
func WithToken(token string) Option { return func(c *Client) { c.token = token } }

// WithNamespace makes the job and secret calls act in namespace ns (default: "default").
func WithNamespace(ns string) Option { return func(c *Client) { c.namespace = ns } }

// WithHTTPClient sends the calls through hc (default: http.DefaultClient). A call to wait
// for a run (TriggerOptions.Wait) needs a timeout above the wait.
func WithHTTPClient(hc *http.Client) Option { return func(c *Client) { c.http = hc } }

// New is a Client of the API at baseURL, such as "http://127.0.0.1:8080".
func New(baseURL string, opts ...Option) *Client {
	c := &Client{base: strings.TrimRight(baseURL, "/"), namespace: "default", http: http.DefaultClient}
	for _, o := range opts {
		o(c)
	}
	return c
}

// InNamespace is a copy of c that acts in namespace ns.
func (c *Client) InNamespace(ns string) *Client {
	d := *c
	d.namespace = ns
	return &d
}

// maxAnswer bounds an answer read into memory.
const maxAnswer = 64 << 20

// request is one call: method and path (with the query), body (JSON-encoded unless a
// []byte), extra headers, and where to decode a success's JSON answer.
type request struct {
	method, path string
	query        url.Values
	body         any
	header       http.Header
	out          any
}

// do sends r and returns the answer's status. A status of 400 and above is a *Problem;
// a call that reached no server is the transport's error, wrapped.
func (c *Client) do(ctx context.Context, r request) (int, error) {
	u := c.base + r.path
	if len(r.query) > 0 {
		u += "?" + r.query.Encode()
	}
	var rd io.Reader
	if r.body != nil {
		b, ok := r.body.([]byte)
		if !ok {
			var err error
			if b, err = json.Marshal(r.body); err != nil {
				return 0, encodeError(r.method, r.path, err)
			}
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, r.method, u, rd)
	if err != nil {
		return 0, fmt.Errorf("scheduler API at %q: %w", c.base, err)
	}
	req.Header.Set("Accept", "application/json")
	if r.body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	for k, v := range r.header {
		req.Header[k] = v
	}
	res, err := c.http.Do(req)
	if err != nil {
		return 0, &UnreachableError{Err: unwrapURLError(err)}
	}
	defer res.Body.Close()
	b, err := io.ReadAll(io.LimitReader(res.Body, maxAnswer))
	if err != nil {
		return res.StatusCode, fmt.Errorf("%s %s: incomplete answer: %w", r.method, r.path, err)
	}
	if res.StatusCode >= 400 {
		p := &Problem{}
		if json.Unmarshal(b, p) != nil || p.Title == "" {
			p = &Problem{Title: fmt.Sprintf("HTTP %d", res.StatusCode), Detail: strings.TrimSpace(string(b))}
		}
		p.Status = res.StatusCode
		return res.StatusCode, p
	}
	if r.out != nil && len(bytes.TrimSpace(b)) > 0 {
		if err := json.Unmarshal(b, r.out); err != nil {
			return res.StatusCode, fmt.Errorf("%s %s: unexpected answer: %w", r.method, r.path, err)
		}
	}
	return res.StatusCode, nil
}

// encodeError is a body that could not be encoded, before any call.
func encodeError(method, path string, err error) error {
	return fmt.Errorf("encode %s %s: %w", method, path, err)
}

// UnreachableError is a call that got no answer: no server at the base URL, a refused
// connection, a timeout.
type UnreachableError struct{ Err error }

func (e *UnreachableError) Error() string { return "server unreachable: " + e.Err.Error() }
func (e *UnreachableError) Unwrap() error { return e.Err }

func unwrapURLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// reasonHeader carries the reason of a definition change, whose body is the definition:
// percent-encoded, as the API reads it.
func reasonHeader(h http.Header, reason string) http.Header {
	if reason == "" {
		return h
	}
	if h == nil {
		h = http.Header{}
	}
	h.Set("X-Reason", url.PathEscape(reason))
	return h
}

// ReasonRequest is the optional body of an action (pause, resume, cancel, rerun, step-down,
// drain, a token's revoke, a key rotation): the reason its audit row keeps. The API decodes
// it with this very type.
type ReasonRequest struct {
	Reason string `json:"reason,omitempty"`
}

// reasonBody is an action's optional body: none without a reason.
func reasonBody(reason string) any {
	if reason == "" {
		return nil
	}
	return ReasonRequest{Reason: reason}
}
