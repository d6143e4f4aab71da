package client_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"

	"github.com/schedulerhq/scheduler/client"
)

// fakeScheduler stands in for a replica in these examples: it knows job "nightly" and its
// one run, and answers like the API (GET /openapi.yaml on a replica describes every route).
func fakeScheduler() *httptest.Server {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/jobs", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, `{"jobs":[{"name":"nightly","namespace":"default","schedule_text":"every day at 02:00 UTC","kind":"http"}],"next_cursor":null}`)
	})
	mux.HandleFunc("POST /v1/jobs/nightly/runs", func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusAccepted)
		fmt.Fprint(w, `{"id":42,"job":"nightly","namespace":"default","trigger":"manual","status":"queued"}`)
	})
	mux.HandleFunc("GET /v1/jobs/{name}", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/problem+json")
		w.WriteHeader(http.StatusNotFound)
		fmt.Fprintf(w, `{"type":"https://scheduler.dev/problems/job-not-found","title":"No such job","status":404,"detail":"no job named \"%s\"","errors":[{"field":"name","detail":"unknown job"}]}`, r.PathValue("name"))
	})
	return httptest.NewServer(mux)
}

// List the jobs of a namespace, page by page.
func Example() {
	srv := fakeScheduler()
	defer srv.Close()

	c := client.New(srv.URL, client.WithToken("sch_..."), client.WithNamespace("default"))
	jobs, err := c.AllJobs(context.Background(), client.ListJobsOptions{Limit: 100})
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, j := range jobs {
		fmt.Printf("%s: %s\n", j.Name, j.ScheduleText)
	}
	// Output: nightly: every day at 02:00 UTC
}

// Run a job now; with an Idempotency-Key, a retry returns the same run.
func ExampleClient_TriggerRun() {
	srv := fakeScheduler()
	defer srv.Close()

	c := client.New(srv.URL)
	t, err := c.TriggerRun(context.Background(), "nightly", client.TriggerOptions{
		Reason:         "re-run after the fix",
		IdempotencyKey: "6f1c1f4e-4b8a-4c69-9a51-1d2b7f0c1e11",
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("run %d %s (HTTP %d)\n", t.Run.ID, t.Run.Status, t.Status)
	// Output: run 42 queued (HTTP 202)
}

// A refused call is a *client.Problem: branch on its Slug, show its fields.
func ExampleProblem() {
	srv := fakeScheduler()
	defer srv.Close()

	c := client.New(srv.URL)
	_, err := c.GetJob(context.Background(), "nightyl")
	var p *client.Problem
	if errors.As(err, &p) && p.Slug() == "job-not-found" {
		fmt.Println(p.Status, p.Detail)
		for _, f := range p.Errors {
			fmt.Printf("  %s: %s\n", f.Field, f.Detail)
		}
	}
	// Output:
	// 404 no job named "nightyl"
	//   name: unknown job
}
