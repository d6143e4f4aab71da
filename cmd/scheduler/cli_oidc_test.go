package main

import (
	"crypto/rand"
	"encoding/base64"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schedulerhq/scheduler/internal/config"
	"github.com/schedulerhq/scheduler/internal/secrets/seal"
	"github.com/schedulerhq/scheduler/replica/replicatest"
)

// The signing keys through the command line: listed (made on first use), and a rotation
// refused while the next key is younger than its pre-publication, saying when it may go.
func TestOIDCCommands(t *testing.T) {
	t.Parallel()
	raw := make([]byte, seal.KeySize)
	_, err := rand.Read(raw)
	require.NoError(t, err)
	key, err := seal.ParseKey(base64.StdEncoding.EncodeToString(raw))
	require.NoError(t, err)
	srv := replicatest.Start(t, replicatest.Options{Token: cliToken, Runtime: config.Runtime{SecretBox: seal.New(key)}})
	env := []string{"SCHEDULER_URL=" + srv.URL, "SCHEDULER_API_TOKEN=" + cliToken}

	code, out, stderr := runCLI(t, env, "oidc", "keys")
	require.Equal(t, exitOK, code, stderr)
	assert.Contains(t, out, "issuer http://127.0.0.1")
	assert.Regexp(t, `(?m)^\S+\s+current\s`, out)
	assert.Regexp(t, `(?m)^\S+\s+next\s`, out)

	code, _, stderr = runCLI(t, env, "oidc", "rotate", "--reason", "drill")
	assert.Equal(t, exitFailure, code)
	assert.Contains(t, stderr, "may sign from")

	_, out, stderr = runCLI(t, env, "oidc")
	assert.Contains(t, out+stderr, "rotate")
}
