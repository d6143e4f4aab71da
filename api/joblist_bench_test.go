package api

import (
	"bytes"
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/schedulerhq/scheduler/internal/metrics"
	"github.com/schedulerhq/scheduler/internal/runtimejob"
	"github.com/schedulerhq/scheduler/internal/store"
	"github.com/schedulerhq/scheduler/internal/store/storetest"
)

// benchJobs is how many runtime jobs BenchmarkJobList defines: the scale bench's 10 k.
const benchJobs = 10_000

// BenchmarkJobList measures GET /v1/jobs without parameters over 10 000 runtime HTTP jobs,
// each with a last run: its default page of 100 (the unpaged list it once was took 300 to
// 390 ms and 12 MB). The Counts and EveryNamespace benchmarks read every job's state and
// view, which is what the replica's cache of views (jobs_cache.go) is kept for:
//
//	go test ./api/ -run '^$' -bench JobList -benchtime 20x
func BenchmarkJobList(b *testing.B) { benchJobList(b, "/v1/jobs") }

// BenchmarkJobListCounts measures the overview's request over the same jobs: its first page
// of 100 with the namespace's health, which reads the state of every job (issue 34).
func BenchmarkJobListCounts(b *testing.B) { benchJobList(b, "/v1/jobs?limit=100&counts=true") }

// BenchmarkJobListEveryNamespace measures the admin's all-namespaces request over the same
// jobs: its failing ones with every namespace's health (GET /v1/jobs?namespace=*).
func BenchmarkJobListEveryNamespace(b *testing.B) {
	benchJobList(b, "/v1/jobs?namespace=*&status=failing&limit=100&counts=true")
}

func benchJobList(b *testing.B, path string) {
	a := newTestAPI(b)
	a.server = NewServer(Config{DB: a.db.DB, InstanceID: testInstance, Jobs: testJobs(b), APIToken: testToken,
		Recorder: metrics.New(), MaxJobs: benchJobs, Runtime: runtimejob.Env{}})
	a.http.Config.Handler = a.server.Handler()
	a.exec(`INSERT INTO job_definitions (name, kind, definition)
		SELECT format('job-%s', lpad(i::text, 5, '0')), 'http', jsonb_build_object(
			'name', format('job-%s', lpad(i::text, 5, '0')), 'schedule', '* * * * *',
			'description', 'a scale job', 'labels', jsonb_build_object('team', 'bench'),
			'http', jsonb_build_object('url', format('https://receiver.internal/jobs/%s', i)))
		FROM generate_series(1, $1) AS i`, benchJobs)
	rows, err := a.db.Pool.Query(context.Background(), `SELECT name FROM job_definitions`)
	require.NoError(b, err)
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(b, err)
	now := time.Now()
	runs := make([]storetest.RunOpts, len(names))
	for i, name := range names {
		runs[i] = storetest.RunOpts{Job: name, Status: store.StatusSucceeded, ScheduledAt: now.Truncate(time.Minute),
			StartedAt: now, FinishedAt: now, DefinitionVersion: 1}
	}
	a.insertRuns(runs...)
	a.exec(`ANALYZE`)

	// The answer is read into one buffer kept across requests: a fresh 13 MB one grown by
	// io.ReadAll cost the client more than the server's whole answer.
	var body bytes.Buffer
	get := func() int {
		req, err := http.NewRequest(http.MethodGet, a.http.URL+path, nil)
		require.NoError(b, err)
		req.Header.Set("Authorization", "Bearer "+testToken)
		res, err := a.http.Client().Do(req)
		require.NoError(b, err)
		defer res.Body.Close()
		body.Reset()
		_, err = body.ReadFrom(res.Body)
		require.NoError(b, err)
		require.Equal(b, http.StatusOK, res.StatusCode, "%.300s", body.Bytes())
		return body.Len()
	}
	size := get() // the first answer fills what a replica keeps between requests
	b.ReportMetric(float64(size), "bytes/answer")
	b.ResetTimer()
	for b.Loop() {
		get()
	}
}
