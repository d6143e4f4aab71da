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
	"strconv"
	"strings"

	"github.com/schedulerhq/scheduler/internal/definition"
)

// apply's requests to the server: the list of a namespace's jobs, and a definition's write,
// with every wrong field of a refused one.

// jobListPage is how many jobs apply asks for per page of GET /v1/jobs: the API's largest.
const jobListPage = 500

// listJobs reads every job's view in namespace ns, page by page (GET /v1/jobs?limit=&cursor=,
// or /v1/namespaces/{ns}/jobs).
func (c *client) listJobs(ctx context.Context, ns string) ([]jobView, error) {
	var all []jobView
	q := url.Values{"limit": {strconv.Itoa(jobListPage)}}
	for {
		var page struct {
			Jobs       []jobView `json:"jobs"`
			NextCursor *string   `json:"next_cursor"`
		}
		if _, err := c.do(ctx, "GET", jobsPath(ns), q, nil, nil, &page); err != nil {
			return nil, err
		}
		all = append(all, page.Jobs...)
		if page.NextCursor == nil || *page.NextCursor == "" || len(page.Jobs) == 0 {
			return all, nil
		}
		q.Set("cursor", *page.NextCursor)
	}
}

// problemLines says why a job failed: one line per wrong field of an invalid definition,
// else the server's words.
func problemLines(err error) []string {
	var de *definitionError
	switch {
	case !errors.As(err, &de):
		return []string{err.Error()}
	case de.slug() == "invalid-definition" && len(de.Fields) > 0:
		lines := make([]string, len(de.Fields))
		for i, f := range de.Fields {
			lines[i] = f.Field + ": " + f.Detail
		}
		return lines
	case de.Status == http.StatusConflict && de.slug() == "job-exists":
		// POST found the name taken: someone created the job after apply read the list.
		return []string{"the job was created on the server since apply read the list; run apply again"}
	case de.Status == http.StatusPreconditionFailed:
		// The server's detail tells an API client to GET and send If-Match again, which
		// for apply is running it again.
		now := ""
		if len(de.Fields) > 0 {
			now = " (" + de.Fields[0].Detail + ")"
		}
		return []string{"the job changed on the server since apply read it" + now + "; run apply again"}
	}
	return []string{de.Error()}
}

// definitionError is a problem answer to a PUT, with every wrong field it names.
type definitionError struct {
	*apiError
	Fields []fieldProblem
}

func (e *definitionError) Unwrap() error { return e.apiError }

// writeJob sends a definition with method to path (POST …/jobs, PUT …/jobs/{name}):
// with If-Match when version is one (not 0), or with ?dry_run=true. It does what client.do
// does, and keeps the list of wrong fields of a 422 answer, which do drops.
func (c *client) writeJob(ctx context.Context, method, path string, d definition.Definition, version int64, dryRun bool) (jobView, error) {
	var v jobView
	body, err := json.Marshal(d)
	if err != nil {
		return v, err
	}
	u := c.base + path
	if dryRun {
		u += "?dry_run=true"
	}
	req, err := http.NewRequestWithContext(ctx, method, u, bytes.NewReader(body))
	if err != nil {
		return v, &apiError{Title: "Invalid --url", Detail: err.Error()}
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("Content-Type", "application/json")
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	for k, v := range c.changeHeader(ifMatch(version)) {
		req.Header.Set(k, v)
	}
	res, err := c.http.Do(req)
	if err != nil {
		return v, &apiError{Title: "Server unreachable",
			Detail: fmt.Sprintf("%s (check --url or SCHEDULER_URL, and that a replica runs there)", unwrapURLError(err))}
	}
	defer res.Body.Close()
	b, err := io.ReadAll(io.LimitReader(res.Body, 16<<20))
	if err != nil {
		return v, &apiError{Title: "Incomplete answer", Detail: err.Error()}
	}
	if res.StatusCode >= 400 {
		p := &apiError{}
		if json.Unmarshal(b, p) != nil || p.Title == "" {
			p = &apiError{Title: fmt.Sprintf("HTTP %d", res.StatusCode), Detail: strings.TrimSpace(string(b))}
		}
		p.Status = res.StatusCode
		return v, &definitionError{apiError: p, Fields: p.Errors}
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return v, &apiError{Title: "Unexpected answer", Detail: fmt.Sprintf("%s %s: %v", method, path, err)}
	}
	return v, nil
}
