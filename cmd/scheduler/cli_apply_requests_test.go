package main

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schedulerhq/scheduler/client"
	"github.com/schedulerhq/scheduler/internal/namespace"
	"github.com/schedulerhq/scheduler/replica/replicatest"
)

// request is one request apply made: its method, path, query and If-Match.
type request struct {
	method, path, ifMatch string
	query                 url.Values
}

func (r request) String() string { return r.method + " " + r.path }

// countingProxy forwards to a replica and records every request. It shrinks each page of
// GET /v1/jobs to pageSize jobs, so that a few jobs take several pages of the real server.
type countingProxy struct {
	mu       sync.Mutex
	requests []request
}

func startCountingProxy(t *testing.T, target string, pageSize int) (*countingProxy, string) {
	t.Helper()
	u, err := url.Parse(target)
	require.NoError(t, err)
	p := &countingProxy{}
	proxy := httputil.NewSingleHostReverseProxy(u)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		if r.Method == http.MethodGet && r.URL.Path == "/v1/jobs" && q.Has("limit") {
			q.Set("limit", fmt.Sprint(pageSize))
			r.URL.RawQuery = q.Encode()
		}
		p.mu.Lock()
		p.requests = append(p.requests, request{r.Method, r.URL.Path, r.Header.Get("If-Match"), q})
		p.mu.Unlock()
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return p, srv.URL
}

// take returns the requests recorded since the last take.
func (p *countingProxy) take() []request {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := p.requests
	p.requests = nil
	return out
}

// split separates the reads (GET /v1/jobs, each page) from the rest; a dry run's requests
// (?dry_run=true) count as neither, nor does GET /v1/whoami (the namespace a token implies).
func split(reqs []request) (pages []request, writes []string, dryRuns int) {
	for _, r := range reqs {
		switch {
		case r.method == http.MethodGet && r.path == "/v1/whoami":
		case r.method == http.MethodGet && r.path == "/v1/jobs":
			pages = append(pages, r)
		case r.query.Get("dry_run") == "true":
			dryRuns++
		default:
			w := r.String()
			if r.ifMatch != "" {
				w += " If-Match: " + r.ifMatch
			}
			writes = append(writes, w)
		}
	}
	return pages, writes, dryRuns
}

// apply reads the job list once, page by page, and sends a write only for a job that
// changed: creating ten jobs costs ten POSTs, applying the same file again (or one that
// spells out the defaults) costs no write at all, and an edit with --prune costs one PUT
// and one DELETE, each with If-Match of the version the list gave, and one POST. The pages
// are shrunk to 4 jobs so the cursor is followed against the real server.
func TestApplyReadsTheListOnceAndWritesOnlyWhatChanged(t *testing.T) {
	t.Parallel()
	srv := replicatest.Start(t, replicatest.Options{Token: cliToken})
	const pageSize = 4
	proxy, proxyURL := startCountingProxy(t, srv.URL, pageSize)
	env := []string{"SCHEDULER_URL=" + proxyURL, "SCHEDULER_API_TOKEN=" + cliToken}
	dir := t.TempDir()
	apply := func(content string, flags ...string) (string, []request) {
		t.Helper()
		p := filepath.Join(dir, "jobs.yaml")
		require.NoError(t, os.WriteFile(p, []byte(content), 0o600))
		proxy.take()
		code, out, stderr := runCLI(t, env, append([]string{"apply", "-f", p}, flags...)...)
		require.Equal(t, exitOK, code, "%s%s", out, stderr)
		return out, proxy.take()
	}
	// listed is how many jobs GET /v1/jobs lists now, built-in ones included.
	listed := func() int {
		t.Helper()
		pages, err := listJobs(t.Context(), client.New(srv.URL, client.WithToken(cliToken)), namespace.Default)
		require.NoError(t, err)
		return len(pages)
	}
	// wantPages is how many pages of pageSize the list of n jobs takes.
	wantPages := func(n int) int { return (n + pageSize - 1) / pageSize }
	job := func(name, extra string) string {
		return fmt.Sprintf("- name: %s\n  schedule: \"0 0 1 1 *\"\n%s  http: {url: \"https://example.com/%s\"}\n", name, extra, name)
	}
	file := func(names []string, extra map[string]string) string {
		s := "jobs:\n"
		for _, n := range names {
			s += job(n, extra[n])
		}
		return s
	}
	var names []string
	for i := range 10 {
		names = append(names, fmt.Sprintf("job-%02d", i))
	}

	n := listed()
	out, reqs := apply(file(names, nil))
	pages, writes, _ := split(reqs)
	assert.Len(t, pages, wantPages(n), "one read of the list, page by page")
	assert.Equal(t, strings.Repeat("POST /v1/jobs\n", 10), strings.Join(writes, "\n")+"\n", "one POST per new job")
	assert.Equal(t, 10, strings.Count(out, "created job-"), out)
	for i, p := range pages {
		assert.Equal(t, i > 0, p.query.Has("cursor"), "page %d follows the cursor of the one before", i)
	}

	t.Run("a second apply of the same file sends no write", func(t *testing.T) {
		n := listed()
		out, reqs := apply(file(names, nil))
		pages, writes, dryRuns := split(reqs)
		assert.Len(t, pages, wantPages(n))
		assert.Empty(t, writes)
		assert.Zero(t, dryRuns)
		assert.Equal(t, 10, strings.Count(out, "unchanged job-"), out)
	})

	t.Run("defaults written out are the same definition: no write", func(t *testing.T) {
		_, reqs := apply(file(names, map[string]string{"job-00": "  timeout: 60s\n  overlap: skip\n  min_gap: 0s\n"}))
		_, writes, _ := split(reqs)
		assert.Empty(t, writes)
	})

	versions := map[string]int64{}
	list, err := listJobs(t.Context(), client.New(srv.URL, client.WithToken(cliToken)), namespace.Default)
	require.NoError(t, err)
	for _, v := range list {
		versions[v.Name] = jobVersion(&v)
	}
	edited := append(append([]string{}, names[:9]...), "job-new") // job-09 left out
	editedFile := file(edited, map[string]string{"job-03": "  description: edited\n"})

	t.Run("--dry-run sends no write", func(t *testing.T) {
		out, reqs := apply(editedFile, "--prune", "--dry-run")
		_, writes, dryRuns := split(reqs)
		assert.Empty(t, writes)
		assert.Equal(t, 2, dryRuns, "the server checks the new job and the changed one")
		assert.Contains(t, out, "1 to create, 1 to update, 8 unchanged, 1 to delete")
	})

	t.Run("an edit with --prune: one PUT, one POST, one DELETE, with If-Match", func(t *testing.T) {
		out, reqs := apply(editedFile, "--prune")
		_, writes, _ := split(reqs)
		assert.ElementsMatch(t, []string{
			fmt.Sprintf(`PUT /v1/jobs/job-03 If-Match: "%d"`, versions["job-03"]),
			"POST /v1/jobs",
			fmt.Sprintf(`DELETE /v1/jobs/job-09 If-Match: "%d"`, versions["job-09"]),
		}, writes)
		assert.Regexp(t, `(?m)^updated job-03 \(version \d+\)$`, out)
		assert.Regexp(t, `(?m)^created job-new \(version \d+\)$`, out)
		assert.Regexp(t, `(?m)^deleted job-09$`, out)
		assert.Equal(t, 8, strings.Count(out, "unchanged job-"), out)
	})
}
