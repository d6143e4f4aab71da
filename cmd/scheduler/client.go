package main

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

	wire "github.com/schedulerhq/scheduler/client"
)

// client is the command line's small hand-written client of the /v1 API. It is written by
// hand rather than generated from api/openapi.yaml: the commands need a dozen calls, the
// problem+json errors mapped to exit codes, and nothing else, and the spec and the server
// are already held together by the API tests (every answer they get is validated against
// the spec) and the CLI tests (every command runs against a real server).
type client struct {
	base  string
	token string
	http  *http.Client
	// reason (apply's and delete's --reason) goes with every definition change, in the
	// X-Reason header, to the change's audit row.
	reason string
}

// changeHeader is header with the X-Reason of a definition change added, percent-encoded
// as the API reads it.
func (c *client) changeHeader(header map[string]string) map[string]string {
	if c.reason == "" {
		return header
	}
	out := map[string]string{"X-Reason": url.PathEscape(c.reason)}
	for k, v := range header {
		out[k] = v
	}
	return out
}

// apiError is an answer that is not a success: a problem (RFC 9457), or a failure to reach
// the server at all (status 0).
type apiError struct {
	Status int
	Type   string `json:"type"`
	Title  string `json:"title"`
	Detail string `json:"detail"`
	// Errors are the fields a refused request got wrong, one problem each.
	Errors []fieldProblem `json:"errors"`
	// ActiveRunID is the job's run in the way of a trigger with other params (run-active).
	ActiveRunID int64 `json:"active_run_id"`
}

// fieldProblem is one field a problem is about: every wrong field of a request (422), or the
// header of a failed If-Match (412).
type fieldProblem struct {
	Field  string `json:"field"`
	Detail string `json:"detail"`
}

func (e *apiError) Error() string {
	switch {
	case e.Title != "" && e.Detail != "":
		return e.Title + ": " + e.Detail
	case e.Title != "":
		return e.Title
	default:
		return e.Detail
	}
}

// slug is the problem type's last segment ("job-not-found").
func (e *apiError) slug() string {
	return e.Type[strings.LastIndexByte(e.Type, '/')+1:]
}

// do sends one request and decodes a JSON answer into out (when not nil). It returns the
// status; any status of 400 and above comes back as an *apiError.
func (c *client) do(ctx context.Context, method, path string, query url.Values, body any, header map[string]string, out any) (int, error) {
	u := c.base + path
	if len(query) > 0 {
		u += "?" + query.Encode()
	}
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return 0, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, rd)
	if err != nil {
		return 0, &apiError{Title: "Invalid --url", Detail: err.Error()}
	}
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	res, err := c.http.Do(req)
	if err != nil {
		return 0, &apiError{Title: "Server unreachable",
			Detail: fmt.Sprintf("%s (check --url or SCHEDULER_URL, and that a replica runs there)", unwrapURLError(err))}
	}
	defer res.Body.Close()
	b, err := io.ReadAll(io.LimitReader(res.Body, 16<<20))
	if err != nil {
		return res.StatusCode, &apiError{Title: "Incomplete answer", Detail: err.Error()}
	}
	if res.StatusCode >= 400 {
		e := &apiError{Status: res.StatusCode}
		if json.Unmarshal(b, e) != nil || e.Title == "" {
			e.Title = fmt.Sprintf("HTTP %d", res.StatusCode)
			e.Detail = strings.TrimSpace(string(b))
		}
		return res.StatusCode, e
	}
	if out != nil {
		if raw, ok := out.(*json.RawMessage); ok {
			*raw = b
		} else if err := json.Unmarshal(b, out); err != nil {
			return res.StatusCode, &apiError{Title: "Unexpected answer", Detail: fmt.Sprintf("%s %s: %v", method, path, err)}
		}
	}
	return res.StatusCode, nil
}

func unwrapURLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// finished tells whether a run has ended: every status but queued and running is final.
func finished(r *wire.Run) bool { return r.Status != "queued" && r.Status != "running" }
