package main

import (
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schedulerhq/scheduler/replica/replicatest"
)

// A chain in one file, children first, applies in one go; `scheduler job` names a job's
// parents and children; a parent is deleted only with --force and a reason.
func TestApplyAndDeleteAChain(t *testing.T) {
	t.Parallel()
	srv := replicatest.Start(t, replicatest.Options{Token: cliToken})
	env := []string{"SCHEDULER_URL=" + srv.URL, "SCHEDULER_API_TOKEN=" + cliToken}
	file := t.TempDir() + "/etl.yaml"
	require.NoError(t, os.WriteFile(file, []byte(`jobs:
- {name: load, after: [transform], http: {url: "https://etl.example.com/load"}}
- {name: transform, after: [extract], http: {url: "https://etl.example.com/transform"}}
- {name: extract, schedule: "0 2 * * *", enabled: false, http: {url: "https://etl.example.com/extract"}}
`), 0o600))
	code, out, stderr := runCLI(t, env, "apply", "-f", file)
	require.Equal(t, exitOK, code, "out: %s\nstderr: %s", out, stderr)

	code, out, stderr = runCLI(t, env, "job", "transform")
	require.Equal(t, exitOK, code, stderr)
	assert.Regexp(t, `(?m)^Schedule: +after extract$`, out)
	assert.Regexp(t, `(?m)^After: +extract$`, out)
	assert.Regexp(t, `(?m)^Runs before: +load$`, out)
	assert.Contains(t, out, "none of its own: it runs after its parents succeed")

	code, _, stderr = runCLI(t, env, "delete", "extract")
	assert.Equal(t, exitFailure, code)
	assert.Contains(t, stderr, "transform")
	code, _, stderr = runCLI(t, env, "delete", "extract", "--force", "--reason", "replaced by ingest")
	require.Equal(t, exitOK, code, stderr)
}
