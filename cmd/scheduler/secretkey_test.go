package main

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schedulerhq/scheduler/internal/config"
	"github.com/schedulerhq/scheduler/internal/secrets"
	"github.com/schedulerhq/scheduler/internal/secrets/seal"
	"github.com/schedulerhq/scheduler/internal/store"
	"github.com/schedulerhq/scheduler/internal/testdb"
	"github.com/schedulerhq/scheduler/replica/replicatest"
)

func newTestKey(t *testing.T) (string, *seal.Key) {
	t.Helper()
	raw := make([]byte, seal.KeySize)
	_, err := rand.Read(raw)
	require.NoError(t, err)
	encoded := base64.StdEncoding.EncodeToString(raw)
	k, err := seal.ParseKey(encoded)
	require.NoError(t, err)
	return encoded, k
}

// A key rotation end to end: values sealed with the old key are re-sealed with the new one,
// open with it alone afterwards, keep their versions; a second run has nothing to do; a value
// whose key the operator did not give is reported, with the key id still in use.
func TestSecretKeyRotate(t *testing.T) {
	ctx := context.Background()
	u := testdb.New(t)
	db := testdb.Connect(t, u, store.Options{})
	_, _, err := db.PutNamespace(ctx, store.Namespace{Name: "billing"})
	require.NoError(t, err)
	oldEnc, oldKey := newTestKey(t)
	newEnc, newKey := newTestKey(t)
	_, strayKey := newTestKey(t)
	put := func(box *seal.Box, ns, name, value string) {
		id, sealed, err := box.Seal(ns, name, []byte(value))
		require.NoError(t, err)
		_, _, err = db.PutSecret(ctx, store.SealedSecret{Secret: store.Secret{Namespace: ns, Name: name, KeyID: id,
			AllowedHosts: []string{"api.example.com"}}, Sealed: sealed})
		require.NoError(t, err)
	}
	values := map[string]string{"A": "value-a", "B": "value-b", "C": "value-c"}
	for name, v := range values {
		put(seal.New(oldKey), "billing", name, v)
	}
	put(seal.New(oldKey), "default", "A", "default-a")
	put(seal.New(oldKey), "billing", "B", values["B"]) // version 2

	environ := []string{"DATABASE_URL=" + u, "SCHEDULER_SECRET_KEY=" + newEnc, "SCHEDULER_SECRET_KEY_PREVIOUS=" + oldEnc}
	code, stdout, stderr := runCLI(t, environ, "secret-key", "rotate")
	require.Equal(t, exitOK, code, stderr)
	assert.Equal(t, "re-sealed 4 secrets with key "+newKey.ID()+"\n"+
		"key ids still in use besides "+newKey.ID()+": none; SCHEDULER_SECRET_KEY_PREVIOUS may be removed\n", stdout)
	assert.NotContains(t, stdout+stderr, newEnc)

	onlyNew := secrets.New(nil, seal.New(newKey), db.DB)
	got, err := onlyNew.Resolve(ctx, "billing", []string{"A", "B", "C"})
	require.NoError(t, err, "every value opens with the new key alone")
	for name, v := range values {
		assert.Equal(t, v, got[name].Value)
	}
	b, err := db.Secret(ctx, "billing", "B")
	require.NoError(t, err)
	assert.Equal(t, int64(2), b.Version, "a re-seal keeps the version")
	assert.Equal(t, newKey.ID(), b.KeyID)

	code, stdout, _ = runCLI(t, environ, "secret-key", "rotate")
	require.Equal(t, exitOK, code)
	assert.Contains(t, stdout, "re-sealed 0 secrets", "idempotent")

	put(seal.New(strayKey), "billing", "STRAY", "stray-value")
	code, stdout, stderr = runCLI(t, environ, "secret-key", "rotate")
	assert.Equal(t, exitFailure, code)
	assert.Contains(t, stdout, "re-sealed 0 secrets")
	assert.Contains(t, stdout, "key ids still in use besides "+newKey.ID()+": "+strayKey.ID()+" (1 secret)")
	assert.Contains(t, stderr, "secret STRAY of namespace billing (sealed with key "+strayKey.ID()+") does not open")
	assert.NotContains(t, stdout+stderr, "stray-value")

	code, _, stderr = runCLI(t, []string{"DATABASE_URL=" + u}, "secret-key", "rotate")
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, stderr, "SCHEDULER_SECRET_KEY is not set")
	code, _, _ = runCLI(t, environ, "secret-key", "spin")
	assert.Equal(t, exitUsage, code)
}

// The secret commands against a whole replica with a key: set reads the value from stdin,
// list shows names and hosts, never the value; delete removes it.
func TestSecretCommandsAgainstAReplica(t *testing.T) {
	t.Parallel()
	_, key := newTestKey(t)
	srv := replicatest.Start(t, replicatest.Options{Token: cliToken,
		Runtime: config.Runtime{SecretBox: seal.New(key)}})
	env := []string{"SCHEDULER_URL=" + srv.URL, "SCHEDULER_API_TOKEN=" + cliToken}
	code, _, stderr := runCLI(t, env, "namespace", "create", "billing")
	require.Equal(t, exitOK, code, stderr)

	const value = "cli-secret-value-51b2"
	code, out, stderr := runCLIWithStdin(t, env, strings.NewReader(value+"\n"),
		"secret set", "BILLING_TOKEN", "-n", "billing", "--allowed-host", "api.billing.example", "--allowed-host", "hooks.billing.example:8443")
	require.Equal(t, exitOK, code, stderr)
	assert.Equal(t, "secret BILLING_TOKEN set in namespace billing; sent only to api.billing.example, hooks.billing.example:8443\n", out)
	code, out, stderr = runCLI(t, env, "secret", "list", "-n", "billing")
	require.Equal(t, exitOK, code, stderr)
	assert.Regexp(t, `(?m)^BILLING_TOKEN +api.billing.example, hooks.billing.example:8443 +`, out)
	assert.NotContains(t, out, value)

	code, _, stderr = runCLIWithStdin(t, env, strings.NewReader(value), "secret set", "BILLING_TOKEN", "-n", "billing", "--allowed-host", "https://x.example")
	assert.Equal(t, exitFailure, code)
	assert.Contains(t, stderr, "leave out the scheme")
	assert.NotContains(t, stderr, value)

	got, err := secrets.New(nil, seal.New(key), srv.DB.DB).Resolve(context.Background(), "billing", []string{"BILLING_TOKEN"})
	require.NoError(t, err)
	assert.Equal(t, value, got["BILLING_TOKEN"].Value, "the value read from stdin, without its line end")

	code, out, stderr = runCLI(t, env, "secret", "delete", "BILLING_TOKEN", "-n", "billing")
	require.Equal(t, exitOK, code, stderr)
	assert.Equal(t, "deleted secret BILLING_TOKEN of namespace billing\n", out)
	code, out, _ = runCLI(t, env, "secret", "list", "-n", "billing")
	require.Equal(t, exitOK, code)
	assert.Equal(t, "no secrets in namespace billing\n", out)
}
