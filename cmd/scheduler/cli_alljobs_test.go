package main

import (
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schedulerhq/scheduler/replica/replicatest"
)

// TestJobsOfEveryNamespace: `scheduler jobs -A` is the admin's list of every namespace's jobs,
// each row with its namespace, and --status narrows it to what fails, is paused or runs;
// a team's token is told it may not, and what it may read instead.
func TestJobsOfEveryNamespace(t *testing.T) {
	t.Parallel()
	srv := replicatest.Start(t, replicatest.Options{Token: cliToken})
	admin := []string{"SCHEDULER_URL=" + srv.URL, "SCHEDULER_API_TOKEN=" + cliToken}
	cli := func(env []string, args ...string) (int, string, string) {
		t.Helper()
		return runCLI(t, env, args...)
	}
	for _, ns := range []string{"billing", "ops"} {
		code, _, stderr := cli(admin, "namespace", "create", ns)
		require.Equal(t, exitOK, code, stderr)
	}
	file := t.TempDir() + "/jobs.yaml"
	require.NoError(t, os.WriteFile(file, []byte(`jobs:
- {name: report, namespace: billing, schedule: "0 2 * * *", http: {url: "https://billing.example.com/x"}}
- {name: backup, namespace: ops, schedule: "0 3 * * *", http: {url: "https://ops.example.com/x"}}
`), 0o600))
	code, _, stderr := cli(admin, "apply", "-f", file)
	require.Equal(t, exitOK, code, stderr)
	code, _, stderr = cli(admin, "pause", "backup", "-n", "ops")
	require.Equal(t, exitOK, code, stderr)

	code, out, stderr := cli(admin, "jobs", "-A")
	require.Equal(t, exitOK, code, stderr)
	assert.Regexp(t, `(?m)^NAMESPACE +NAME +SCHEDULE`, out)
	assert.Regexp(t, `(?m)^billing +report +`, out)
	assert.Regexp(t, `(?m)^ops +backup +.* yes +`, out)
	assert.Regexp(t, `(?m)^default +`, out, "the built-in jobs too")

	code, out, stderr = cli(admin, "jobs", "-A", "--status", "paused")
	require.Equal(t, exitOK, code, stderr)
	assert.Regexp(t, `(?m)^ops +backup +`, out)
	assert.NotContains(t, out, "billing")

	code, out, stderr = cli(admin, "jobs", "-A", "--status", "failing")
	require.Equal(t, exitOK, code, stderr)
	assert.Equal(t, "no job of any namespace is failing\n", out)

	code, out, _ = cli(admin, "jobs", "-A", "-o", "json")
	require.Equal(t, exitOK, code)
	assert.Contains(t, out, `"namespace": "billing"`)

	code, tok, stderr := cli(admin, "token", "create", "-n", "billing", "--role", "viewer", "--name", "bv")
	require.Equal(t, exitOK, code, stderr)
	team := []string{"SCHEDULER_URL=" + srv.URL, "SCHEDULER_API_TOKEN=" + tok[:len(tok)-1]}
	code, _, stderr = cli(team, "jobs", "-A")
	assert.NotEqual(t, exitOK, code)
	assert.Contains(t, stderr, "only an admin may")
	assert.Contains(t, stderr, "GET /v1/namespaces/billing/jobs")
}
