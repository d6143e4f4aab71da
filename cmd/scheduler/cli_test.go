package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schedulerhq/scheduler/internal/jobcontract"
	"github.com/schedulerhq/scheduler/replica/replicatest"
)

const (
	cliToken     = "cli-full-token"
	cliReadToken = "cli-read-token"
)

// The client commands against a whole replica (API, elector, engine) on a test database.
func TestClientCommands(t *testing.T) {
	t.Parallel()
	srv := replicatest.Start(t, replicatest.Options{Token: cliToken, ReadToken: cliReadToken, Extra: []jobcontract.Job{
		replicatest.Quick{JobName: "quick", Schedule: "0 2 * * *"},
		replicatest.Failing{JobName: "broken"},
		replicatest.Blocking{JobName: "slow"},
	}})
	env := []string{"SCHEDULER_URL=" + srv.URL, "SCHEDULER_API_TOKEN=" + cliToken}
	cli := func(args ...string) (int, string, string) {
		t.Helper()
		return runCLI(t, env, args...)
	}
	jsonOf := func(out string) map[string]any {
		t.Helper()
		var m map[string]any
		require.NoError(t, json.Unmarshal([]byte(out), &m), "output: %s", out)
		return m
	}

	t.Run("jobs", func(t *testing.T) {
		code, out, stderr := cli("jobs")
		require.Equal(t, exitOK, code, stderr)
		lines := strings.Split(strings.TrimSpace(out), "\n")
		require.Len(t, lines, srv.Jobs+1, "a header and a line per job:\n%s", out)
		assert.Regexp(t, `^NAME +SCHEDULE +PAUSED +LAST STATUS +NEXT RUN$`, lines[0])
		// Aligned: every row's schedule starts in the header's SCHEDULE column.
		col := strings.Index(lines[0], "SCHEDULE")
		for _, l := range lines[1:] {
			assert.NotEqual(t, byte(' '), l[col], "misaligned row %q", l)
			assert.Equal(t, byte(' '), l[col-1], "misaligned row %q", l)
		}
		assert.Contains(t, out, "every day at 02:00 UTC")

		code, out, _ = cli("jobs", "-o", "json")
		require.Equal(t, exitOK, code)
		list := jsonOf(out)["jobs"].([]any)
		assert.Len(t, list, srv.Jobs)
		assert.Equal(t, "plan-change", list[0].(map[string]any)["name"])
	})

	t.Run("trigger --wait, run, runs, job", func(t *testing.T) {
		code, out, stderr := cli("trigger", "quick", "--wait", "30s", "--reason", "after the import")
		require.Equal(t, exitOK, code, "%s%s", out, stderr)
		assert.Regexp(t, `^run \d+ of quick succeeded after `, out)

		code, out, _ = cli("trigger", "quick", "--dry-run", "--wait", "30s", "-o", "json")
		require.Equal(t, exitOK, code)
		run := jsonOf(out)
		assert.Equal(t, "succeeded", run["status"])
		assert.Equal(t, map[string]any{"dry_run": true}, run["params"])
		id := int64(run["id"].(float64))

		code, out, _ = cli("run", fmt.Sprint(id))
		require.Equal(t, exitOK, code)
		assert.Regexp(t, `(?m)^Status: +succeeded$`, out)
		assert.Contains(t, out, `"tenant:1":1`)
		code, out, _ = cli("run", fmt.Sprint(id), "-o", "json")
		require.Equal(t, exitOK, code)
		assert.Equal(t, float64(id), jsonOf(out)["id"])

		code, out, _ = cli("runs", "quick", "--status", "succeeded", "--trigger", "manual", "--limit", "1", "-o", "json")
		require.Equal(t, exitOK, code)
		runs := jsonOf(out)["runs"].([]any)
		require.Len(t, runs, 1)
		assert.Equal(t, float64(id), runs[0].(map[string]any)["id"])
		code, out, _ = cli("runs", "quick")
		require.Equal(t, exitOK, code)
		assert.Regexp(t, `(?m)^ID +STATUS +TRIGGER +SLOT/CREATED +DURATION +REASON/ERROR$`, out)
		assert.Contains(t, out, "after the import")

		code, out, _ = cli("job", "quick")
		require.Equal(t, exitOK, code)
		assert.Regexp(t, `(?m)^Schedule: +every day at 02:00 UTC \(0 2 \* \* \*\)$`, out)
		assert.Equal(t, 5, strings.Count(out[strings.Index(out, "Next runs:"):strings.Index(out, "Recent runs:")], "Z (in "))
		code, out, _ = cli("job", "quick", "-o", "json")
		require.Equal(t, exitOK, code)
		j := jsonOf(out)
		assert.Len(t, j["job"].(map[string]any)["next_runs"], 5)
		assert.GreaterOrEqual(t, len(j["runs"].([]any)), 2, "the two manual runs, and the missed slot of the catch-up")
	})

	t.Run("idempotency key", func(t *testing.T) {
		key := "3f2504e0-4f89-41d3-9a0c-0305e82c3301"
		_, first, _ := cli("trigger", "quick", "--idempotency-key", key, "-o", "json")
		_, second, _ := cli("trigger", "quick", "--idempotency-key", key, "-o", "json")
		assert.Equal(t, jsonOf(first)["id"], jsonOf(second)["id"])
		code, _, stderr := cli("trigger", "quick", "--idempotency-key", "not-a-uuid")
		assert.Equal(t, exitUsage, code)
		assert.Contains(t, stderr, "UUID v4")
	})

	t.Run("a failed run exits 1 with its error", func(t *testing.T) {
		code, out, _ := cli("trigger", "broken", "--wait", "30s")
		assert.Equal(t, exitFailure, code)
		assert.Contains(t, out, "failed")
		assert.Contains(t, out, "check its credentials")
	})

	t.Run("a wait that runs out exits 1; cancel stops the run", func(t *testing.T) {
		code, out, _ := cli("trigger", "slow", "--wait", "1s", "-o", "json")
		assert.Equal(t, exitFailure, code)
		run := jsonOf(out)
		assert.Contains(t, []any{"queued", "running"}, run["status"])
		id := strconv.FormatInt(int64(run["id"].(float64)), 10)
		// A dry run meeting the real run is refused, not answered with it: the CLI says
		// which run is in the way and what to do.
		code, _, stderr := cli("trigger", "slow", "--dry-run")
		assert.Equal(t, exitRefused, code, stderr)
		assert.Contains(t, stderr, "run "+id+" of slow is ")
		assert.Contains(t, stderr, "scheduler run "+id)
		assert.Contains(t, stderr, "scheduler cancel "+id)
		code, out, stderr = cli("cancel", id, "--reason", "wrong export")
		require.Equal(t, exitOK, code, stderr)
		assert.Contains(t, out, "run "+id)
		require.Eventually(t, func() bool {
			_, out, _ := cli("run", id, "-o", "json")
			return jsonOf(out)["status"] == "cancelled"
		}, 10*time.Second, 50*time.Millisecond)
		// Cancelling a finished run is refused: exit 1 with the problem on one line.
		code, _, stderr = cli("cancel", id)
		assert.Equal(t, exitFailure, code)
		assert.Equal(t, 1, strings.Count(stderr, "\n"), stderr)
		assert.Contains(t, stderr, "The run has already finished: run "+id+" already finished")
	})

	t.Run("pause and resume", func(t *testing.T) {
		code, out, _ := cli("pause", "quick", "--reason", "incident 7")
		require.Equal(t, exitOK, code)
		assert.Contains(t, out, "quick paused")
		_, out, _ = cli("jobs")
		assert.Regexp(t, `(?m)^quick +every day at 02:00 UTC +yes +\S+ +paused$`, out)
		code, out, _ = cli("resume", "quick", "-o", "json")
		require.Equal(t, exitOK, code)
		assert.Equal(t, false, jsonOf(out)["paused"])
		var reason string
		require.NoError(t, srv.DB.Pool.QueryRow(context.Background(),
			`SELECT reason FROM operator_actions WHERE action = 'pause' ORDER BY id DESC LIMIT 1`).Scan(&reason))
		assert.Equal(t, "incident 7", reason)
	})

	t.Run("status and step-down", func(t *testing.T) {
		code, out, _ := cli("status")
		require.Equal(t, exitOK, code)
		assert.Regexp(t, `^Leader: console-test-1, epoch 1, since `, out)
		assert.Regexp(t, `(?m)^console-test-1 +leader +`, out)
		code, out, _ = cli("step-down", "--reason", "drain")
		require.Equal(t, exitOK, code)
		assert.Contains(t, out, "asked console-test-1 (epoch 1) to step down;")
		// The only replica rejoins and is elected again, under a new epoch.
		require.Eventually(t, func() bool {
			_, out, _ := cli("status", "-o", "json")
			l, _ := jsonOf(out)["leader"].(map[string]any)
			return l != nil && l["epoch"] == float64(2)
		}, 10*time.Second, 50*time.Millisecond)
	})

	t.Run("drain names a known replica", func(t *testing.T) {
		code, _, stderr := cli("drain", "nobody", "--reason", "node upgrade")
		assert.NotEqual(t, exitOK, code)
		assert.Contains(t, stderr, "No such replica")
		assert.Contains(t, stderr, "GET /v1/instances")
	})

	t.Run("an unknown job is a usage error that lists the jobs", func(t *testing.T) {
		for _, args := range [][]string{{"trigger", "nope"}, {"job", "nope"}, {"runs", "nope"}, {"pause", "nope"}} {
			code, _, stderr := cli(args...)
			assert.Equal(t, exitUsage, code, args)
			assert.Contains(t, stderr, `No such job: no job named "nope"`)
			assert.Contains(t, stderr, "the jobs are: plan-change, status-sync,")
			assert.Contains(t, stderr, "quick, broken, slow")
		}
	})

	t.Run("refused: wrong token, read-only token, unreachable server", func(t *testing.T) {
		code, out, stderr := runCLI(t, []string{"SCHEDULER_URL=" + srv.URL, "SCHEDULER_API_TOKEN=wrong"}, "jobs")
		assert.Equal(t, exitRefused, code)
		assert.Empty(t, out)
		assert.Equal(t, "scheduler: A valid bearer token is required: the bearer token is wrong, expired or revoked; send an API token as \"Authorization: Bearer <token>\": SCHEDULER_API_TOKEN, a token made with `scheduler token create`, or a service account's token\n", stderr)

		read := []string{"SCHEDULER_URL=" + srv.URL, "SCHEDULER_API_TOKEN=" + cliReadToken}
		code, _, _ = runCLI(t, read, "jobs")
		assert.Equal(t, exitOK, code)
		code, _, stderr = runCLI(t, read, "pause", "quick")
		assert.Equal(t, exitRefused, code)
		assert.Contains(t, stderr, "This token may only read")

		code, _, stderr = runCLI(t, nil, "status", "--url", "http://127.0.0.1:1")
		assert.Equal(t, exitRefused, code)
		assert.Contains(t, stderr, "Server unreachable")
		assert.Contains(t, stderr, "connection refused")
	})

	t.Run("usage", func(t *testing.T) {
		for _, c := range clientCommands {
			code, out, _ := cli(c.name, "--help")
			assert.Equal(t, exitOK, code, c.name)
			assert.True(t, strings.HasPrefix(out, "Usage: scheduler "+c.name), "%s --help: %s", c.name, out)
			assert.Contains(t, out, "-o string")
		}
		code, _, stderr := cli("run")
		assert.Equal(t, exitUsage, code)
		assert.Contains(t, stderr, "expected ID, got 0 argument(s)")
		code, _, _ = cli("run", "abc")
		assert.Equal(t, exitUsage, code)
		code, _, _ = cli("jobs", "-o", "yaml")
		assert.Equal(t, exitUsage, code)
		code, _, _ = cli("runs", "quick", "--status", "exploded")
		assert.Equal(t, exitUsage, code)
		code, _, _ = cli("jobs", "--url", "ftp://x")
		assert.Equal(t, exitUsage, code)
	})
}
