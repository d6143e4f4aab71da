package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/schedulerhq/scheduler/replica"
)

// How GET /v1/jobs answers with every runtime job of the scale run defined: all of them in
// one answer, and one page.

// jobListTiming is how GET /v1/jobs answered with every job defined.
type jobListTiming struct {
	p50, max time.Duration
	bytes    int
}

// jobListRequests is how many times the scale run reads GET /v1/jobs, and jobPageSize the
// limit of its paged reads.
const (
	jobListRequests = 5
	jobPageSize     = 100
)

// timeJobList reads path, a GET /v1/jobs that answers want jobs, from rep's API a few
// times, one request at a time.
func timeJobList(ctx context.Context, rep *replica.Replica, path string, want int) (jobListTiming, error) {
	var t jobListTiming
	srv := httptest.NewServer(rep.Handler())
	defer srv.Close()
	var took []time.Duration
	// One buffer for every answer, as a client that re-reads the list would keep: growing a
	// fresh 13 MB one each time is the client's cost, not the server's.
	var body bytes.Buffer
	for range jobListRequests {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+path, nil)
		if err != nil {
			return t, err
		}
		start := time.Now()
		res, err := srv.Client().Do(req)
		if err != nil {
			return t, err
		}
		var list struct {
			Jobs []json.RawMessage `json:"jobs"`
		}
		body.Reset()
		_, err = body.ReadFrom(res.Body)
		res.Body.Close()
		took = append(took, time.Since(start))
		if err != nil {
			return t, err
		}
		if err := json.Unmarshal(body.Bytes(), &list); err != nil || len(list.Jobs) != want {
			return t, fmt.Errorf("GET %s answered %s with %d jobs, want %d (%v)", path, res.Status, len(list.Jobs), want, err)
		}
		t.bytes = body.Len()
	}
	t.p50, t.max = percentile(took, 50), percentile(took, 100)
	return t, nil
}
