package main

import (
	"context"
	"errors"
	"net/http"

	"github.com/schedulerhq/scheduler/client"
	"github.com/schedulerhq/scheduler/internal/runtimejob"
)

// apply's requests to the server: the list of a namespace's jobs, and a definition's write,
// with every wrong field of a refused one.

// jobListPage is how many jobs apply asks for per page of GET /v1/jobs: the API's largest.
const jobListPage = 500

// listJobs reads every job's view in namespace ns, page by page (GET /v1/jobs?limit=&cursor=,
// or /v1/namespaces/{ns}/jobs).
func listJobs(ctx context.Context, c *client.Client, ns string) ([]client.Job, error) {
	return c.InNamespace(ns).AllJobs(ctx, client.ListJobsOptions{Limit: jobListPage})
}

// problemLines says why a job failed: one line per wrong field of an invalid definition,
// else the server's words.
func problemLines(err error) []string {
	var de *client.Problem
	switch {
	case !errors.As(err, &de):
		return []string{err.Error()}
	case de.Slug() == "invalid-definition" && len(de.Errors) > 0:
		lines := make([]string, len(de.Errors))
		for i, f := range de.Errors {
			lines[i] = f.Field + ": " + f.Detail
		}
		return lines
	case de.Status == http.StatusConflict && de.Slug() == "job-exists":
		// POST found the name taken: someone created the job after apply read the list.
		return []string{"the job was created on the server since apply read the list; run apply again"}
	case de.Status == http.StatusPreconditionFailed:
		// The server's detail tells an API client to GET and send If-Match again, which
		// for apply is running it again.
		now := ""
		if len(de.Errors) > 0 {
			now = " (" + de.Errors[0].Detail + ")"
		}
		return []string{"the job changed on the server since apply read it" + now + "; run apply again"}
	}
	return []string{de.Error()}
}

// writeJob sends a definition to namespace ns: POST …/jobs when version is -1 (a new job),
// else PUT …/jobs/{name}, with If-Match when version is one (above 0), or as a dry run.
func (x *cli) writeJob(ctx context.Context, ns string, d runtimejob.Definition, version int64, dryRun bool) (*client.Job, error) {
	c := x.c.InNamespace(ns)
	o := client.WriteJobOptions{Version: max(version, 0), DryRun: dryRun, Reason: x.reason}
	if version < 0 {
		return c.CreateJob(ctx, d, o)
	}
	return c.PutJob(ctx, d.Name, d, o)
}
