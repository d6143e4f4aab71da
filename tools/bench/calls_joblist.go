package main

import (
	"context"
	"fmt"
	"net/http/httptest"
	"time"

	"github.com/schedulerhq/scheduler/client"
	"github.com/schedulerhq/scheduler/replica"
)

// How GET /v1/jobs answers its first page with every runtime job of the scale run defined.
// (The list has no unpaged form: GET /v1/jobs answers jobPageSize jobs without ?limit.)

// jobListTiming is how GET /v1/jobs answered with every job defined.
type jobListTiming struct {
	p50, max time.Duration
}

// jobListRequests is how many times the scale run reads GET /v1/jobs, and jobPageSize the
// size of its pages: the API's default.
const (
	jobListRequests = 5
	jobPageSize     = 100
)

// timeJobList reads the first page of the job list of n jobs from rep's API a few times, one
// request at a time, through the client package as a program would.
func timeJobList(ctx context.Context, rep *replica.Replica, n int) (jobListTiming, error) {
	var t jobListTiming
	srv := httptest.NewServer(rep.Handler())
	defer srv.Close()
	c := client.New(srv.URL, client.WithHTTPClient(srv.Client()))
	var took []time.Duration
	for range jobListRequests {
		start := time.Now()
		page, err := c.ListJobs(ctx, client.ListJobsOptions{})
		took = append(took, time.Since(start))
		if err != nil {
			return t, err
		}
		if want := min(n, jobPageSize); len(page.Jobs) != want || (page.NextCursor != nil) != (n > jobPageSize) {
			return t, fmt.Errorf("GET /v1/jobs answered %d jobs (next cursor %v), want a page of %d of %d", len(page.Jobs), page.NextCursor, want, n)
		}
	}
	t.p50, t.max = percentile(took, 50), percentile(took, 100)
	return t, nil
}
