package main

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schedulerhq/scheduler/client"
	"github.com/schedulerhq/scheduler/internal/namespace"
	"github.com/schedulerhq/scheduler/replica/replicatest"
)

// `scheduler jobs` reads the list page by page, following the cursor, and never asks for
// the unpaged list; the pages are shrunk to 3 jobs so that a few jobs take several.
func TestJobsReadsTheListPageByPage(t *testing.T) {
	t.Parallel()
	srv := replicatest.Start(t, replicatest.Options{Token: cliToken})
	const pageSize = 3
	proxy, proxyURL := startCountingProxy(t, srv.URL, pageSize)
	env := []string{"SCHEDULER_URL=" + proxyURL, "SCHEDULER_API_TOKEN=" + cliToken}
	c := client.New(srv.URL, client.WithToken(cliToken))
	for i := range 7 {
		_, err := c.CreateJob(t.Context(), map[string]any{
			"name": fmt.Sprintf("job-%02d", i), "schedule": "0 0 1 1 *", "http": map[string]any{"url": "https://example.com/x"}}, client.WriteJobOptions{})
		require.NoError(t, err)
	}
	jobs, err := listJobs(t.Context(), c, namespace.Default)
	require.NoError(t, err)

	for _, flags := range [][]string{{"jobs"}, {"jobs", "-o", "json"}} {
		proxy.take()
		code, out, stderr := runCLI(t, env, flags...)
		require.Equal(t, exitOK, code, "%s%s", out, stderr)
		pages, _, _ := split(proxy.take())
		require.Len(t, pages, (len(jobs)+pageSize-1)/pageSize, "%v: one request a page", flags)
		for i, p := range pages {
			assert.True(t, p.query.Has("limit"), "%v: page %d is paged", flags, i)
			assert.Equal(t, i > 0, p.query.Has("cursor"), "%v: page %d follows the cursor", flags, i)
		}
		for i := range 7 {
			assert.Contains(t, out, fmt.Sprintf("job-%02d", i), flags)
		}
		if len(flags) > 1 {
			assert.Equal(t, len(jobs), strings.Count(out, `"schedule_text"`), "every page's jobs in one answer")
		}
	}
}
