package main

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schedulerhq/scheduler/internal/testdb"
)

// TestServeListsEveryJobOfTheFirstApplication: a real replica's GET /v1/jobs lists the fourteen jobs,
// in the order of docs/first-application.md's job table, each with that table's default schedule, and
// api/openapi.yaml names each of them.
func TestServeListsEveryJobOfTheFirstApplication(t *testing.T) {
	t.Parallel()
	readme, err := os.ReadFile(filepath.Join(testdb.RepoRoot(), "docs", "first-application.md"))
	require.NoError(t, err)
	var want [][2]string // name, schedule
	for _, m := range regexp.MustCompile("(?m)^\\| `([a-z-]+)` \\| `([^`]+)` \\|").FindAllSubmatch(readme, -1) {
		want = append(want, [2]string{string(m[1]), string(m[2])})
	}
	require.Len(t, want, 14, "docs/first-application.md's job table")
	spec, err := os.ReadFile(filepath.Join(testdb.RepoRoot(), "api", "openapi.yaml"))
	require.NoError(t, err)
	for _, w := range want {
		assert.Regexp(t, `[\s,:]`+regexp.QuoteMeta(w[0])+`[\s,]`, string(spec), "api/openapi.yaml names %s", w[0])
	}

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "serve")
	cmd.Env = append(os.Environ(), "SCHEDULER_TEST_EXEC=1", "DATABASE_URL="+testdb.New(t),
		"SCHEDULER_HTTP_ADDR=127.0.0.1:0", "SCHEDULER_INSTANCE_ID=jobs-list-test")
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	addr := ""
	lines := jsonLines(stdout)
	for line := range lines {
		if line["msg"] == "http listening" {
			addr = line["addr"].(string)
			break
		}
	}
	go func() {
		for range lines { // drain until the process exits
		}
	}()
	require.NotEmpty(t, addr, "replica never listened")

	resp, err := http.Get("http://" + addr + "/v1/jobs")
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	var body struct {
		Jobs []struct {
			Name     string `json:"name"`
			Schedule string `json:"schedule"`
		} `json:"jobs"`
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&body))
	var got [][2]string
	for _, j := range body.Jobs {
		got = append(got, [2]string{j.Name, j.Schedule})
	}
	assert.Equal(t, want, got)
}
