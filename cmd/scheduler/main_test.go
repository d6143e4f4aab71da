package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schedulerhq/scheduler/internal/store"
	"github.com/schedulerhq/scheduler/internal/testdb"
)

// TestMain doubles as the scheduler binary: with SCHEDULER_TEST_EXEC=1 the test binary runs
// main() instead of the tests, so tests can start real scheduler processes without a
// separate build.
func TestMain(m *testing.M) {
	if os.Getenv("SCHEDULER_TEST_EXEC") == "1" {
		main()
		return
	}
	testdb.Main(m)
}

func runCLI(t *testing.T, environ []string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code = run(context.Background(), args, environ, &out, &errOut)
	return code, out.String(), errOut.String()
}

func TestConfigErrorsStopStartWithOneClearLineEach(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name     string
		environ  []string
		wantVar  string
		wantHint string
	}{
		{"missing database url", nil, "DATABASE_URL", "postgres://"},
		{"malformed database url", []string{"DATABASE_URL=mysql://x"}, "DATABASE_URL", "postgres://"},
		{"unknown log level", []string{"DATABASE_URL=postgres://localhost/db", "SCHEDULER_LOG_LEVEL=loud"}, "SCHEDULER_LOG_LEVEL", "debug, info, warn, error"},
		{"bad duration", []string{"DATABASE_URL=postgres://localhost/db", "SCHEDULER_LEASE_TIMEOUT=5 parsecs"}, "SCHEDULER_LEASE_TIMEOUT", "30s"},
		{"non-loopback without token", []string{"DATABASE_URL=postgres://localhost/db", "SCHEDULER_HTTP_ADDR=0.0.0.0:8080"}, "SCHEDULER_API_TOKEN", "127.0.0.1"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			code, _, stderr := runCLI(t, tc.environ, "serve")
			assert.Equal(t, exitUsage, code)
			lines := strings.Split(strings.TrimSpace(stderr), "\n")
			require.Len(t, lines, 1, "one line per bad variable, got:\n%s", stderr)
			assert.Contains(t, lines[0], tc.wantVar)
			assert.Contains(t, lines[0], tc.wantHint)
			assert.NotContains(t, stderr, "goroutine", "no stack trace")
		})
	}
}

func TestMigrateCommands(t *testing.T) {
	t.Parallel()
	u := testdb.Empty(t)
	env := []string{"DATABASE_URL=" + u}

	code, out, stderr := runCLI(t, env, "migrate", "up")
	require.Equal(t, exitOK, code, stderr)
	assert.Contains(t, out, "schema version")

	code, out, _ = runCLI(t, env, "migrate", "down", "--all")
	require.Equal(t, exitOK, code)
	assert.Contains(t, out, "schema version 0")

	code, _, stderr = runCLI(t, env, "migrate", "down", "zero")
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, stderr, "positive number")

	code, _, stderr = runCLI(t, env, "migrate", "sideways")
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, stderr, "unknown migrate command")
}

func TestUnknownCommandIsAUsageError(t *testing.T) {
	t.Parallel()
	code, _, stderr := runCLI(t, nil, "frobnicate")
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, stderr, `unknown command "frobnicate"`)
	code, out, _ := runCLI(t, nil, "serve", "--help")
	assert.Equal(t, exitOK, code)
	assert.Empty(t, out)
}

// Three real processes migrating one empty database at once: each must succeed and the
// schema must end at the binary's version, applied once.
func TestConcurrentMigrationFromThreeProcesses(t *testing.T) {
	t.Parallel()
	u := testdb.Empty(t)
	var wg sync.WaitGroup
	outputs := make([][]byte, 3)
	errs := make([]error, 3)
	for i := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cmd := exec.Command(os.Args[0], "migrate", "up")
			cmd.Env = append(os.Environ(), "SCHEDULER_TEST_EXEC=1", "DATABASE_URL="+u)
			outputs[i], errs[i] = cmd.CombinedOutput()
		}()
	}
	wg.Wait()
	for i := range 3 {
		require.NoError(t, errs[i], "process %d: %s", i, outputs[i])
	}
	mg, err := store.NewMigrator(u)
	require.NoError(t, err)
	defer mg.Close()
	v, dirty, err := mg.Version()
	require.NoError(t, err)
	assert.Equal(t, store.SchemaVersion(), v)
	assert.False(t, dirty)
}

// With the database unreachable, a replica stays up, says why in its log, keeps retrying,
// and answers /readyz with 503.
func TestServeWithUnreachableDatabaseRetriesAndIsNotReady(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "serve")
	cmd.Env = append(os.Environ(), "SCHEDULER_TEST_EXEC=1",
		"DATABASE_URL=postgres://nobody@127.0.0.1:1/none?sslmode=disable&connect_timeout=1",
		"SCHEDULER_HTTP_ADDR=127.0.0.1:0", "SCHEDULER_INSTANCE_ID=unreachable-test")
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()

	lines := jsonLines(stdout)
	addr := ""
	retries := 0
	for line := range lines {
		if line["msg"] == "http listening" {
			addr = line["addr"].(string)
		}
		if strings.HasPrefix(line["msg"].(string), "database not ready") {
			retries++
			assert.Contains(t, line["msg"], "Check DATABASE_URL")
		}
		if addr != "" && retries >= 2 {
			break
		}
	}
	go func() {
		for range lines { // drain until the process exits
		}
	}()
	require.NotEmpty(t, addr, "replica never listened")
	require.GreaterOrEqual(t, retries, 2, "replica did not keep retrying")

	resp, err := http.Get("http://" + addr + "/readyz")
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
	resp, err = http.Get("http://" + addr + "/healthz")
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode)
}

// jsonLines decodes a JSON log stream line by line.
func jsonLines(r io.Reader) <-chan map[string]any {
	ch := make(chan map[string]any)
	go func() {
		defer close(ch)
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			var m map[string]any
			if json.Unmarshal(sc.Bytes(), &m) == nil {
				ch <- m
			}
		}
	}()
	return ch
}

func TestHealthcheckFollowsReadyz(t *testing.T) {
	t.Parallel()
	ready := true
	var mu sync.Mutex
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		if r.URL.Path != "/readyz" || !ready {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	}))
	defer srv.Close()
	env := []string{"SCHEDULER_HTTP_ADDR=" + srv.Listener.Addr().String()}

	code, _, stderr := runCLI(t, env, "healthcheck")
	assert.Equal(t, exitOK, code, stderr)
	mu.Lock()
	ready = false
	mu.Unlock()
	code, _, stderr = runCLI(t, env, "healthcheck")
	assert.Equal(t, exitFailure, code)
	assert.Contains(t, stderr, "not ready")
}

// The pool's Close waits for every connection in use; a job that ignores its context must
// not hold the exit: the close is given up after its bound.
func TestCloseWithinGivesUpOnACloseThatHangs(t *testing.T) {
	t.Parallel()
	hang := make(chan struct{})
	defer close(hang)
	start := time.Now()
	assert.False(t, closeWithin(func() { <-hang }, 50*time.Millisecond))
	assert.Less(t, time.Since(start), 5*time.Second)
	assert.True(t, closeWithin(func() {}, time.Minute))
}
