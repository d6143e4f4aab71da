package secrets_test

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schedulerhq/scheduler/internal/runtimejob"
	"github.com/schedulerhq/scheduler/internal/secrets"
	"github.com/schedulerhq/scheduler/internal/secrets/seal"
	"github.com/schedulerhq/scheduler/internal/store"
	"github.com/schedulerhq/scheduler/internal/testdb"
)

func TestMain(m *testing.M) { testdb.Main(m) }

func newBox(t *testing.T) *seal.Box {
	t.Helper()
	raw := make([]byte, seal.KeySize)
	_, err := rand.Read(raw)
	require.NoError(t, err)
	k, err := seal.ParseKey(base64.StdEncoding.EncodeToString(raw))
	require.NoError(t, err)
	return seal.New(k)
}

// put seals value for (ns, name) and stores it, as the API does.
func put(t *testing.T, db store.Executor, box *seal.Box, ns, name, value string, hosts ...string) {
	t.Helper()
	id, sealed, err := box.Seal(ns, name, []byte(value))
	require.NoError(t, err)
	_, _, err = db.PutSecret(context.Background(), store.SealedSecret{
		Secret: store.Secret{Namespace: ns, Name: name, KeyID: id, AllowedHosts: hosts}, Sealed: sealed})
	require.NoError(t, err)
}

func setup(t *testing.T) (*testdb.DB, *seal.Box, *secrets.Source) {
	t.Helper()
	db, _ := testdb.Open(t, store.Options{})
	for _, ns := range []string{"billing", "ops"} {
		_, _, err := db.PutNamespace(context.Background(), store.Namespace{Name: ns})
		require.NoError(t, err)
	}
	box := newBox(t)
	src := secrets.New(map[string]string{"OPS_TOKEN": "operator-value", "SHARED": "operator-shared"}, box, db.DB)
	put(t, db, box, "ops", "DEPLOY_TOKEN", "ops-value", "deploy.ops.example")
	put(t, db, box, "billing", "BILLING_TOKEN", "billing-value", "api.billing.example")
	put(t, db, box, "default", "SHARED", "stored-shared", "a.example")
	put(t, db, box, "default", "STORED_ONLY", "stored-default", "a.example:8443")
	return db, box, src
}

func TestResolveFollowsTheNamespaceRules(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	_, _, src := setup(t)

	got, err := src.Resolve(ctx, "default", []string{"OPS_TOKEN", "SHARED", "STORED_ONLY"})
	require.NoError(t, err)
	assert.Equal(t, map[string]runtimejob.SecretValue{
		"OPS_TOKEN":   {Value: "operator-value"},
		"SHARED":      {Value: "operator-shared"}, // the operator's first, to any host
		"STORED_ONLY": {Value: "stored-default", AllowedHosts: []string{"a.example:8443"}},
	}, got)

	got, err = src.Resolve(ctx, "billing", []string{"BILLING_TOKEN"})
	require.NoError(t, err)
	assert.Equal(t, runtimejob.SecretValue{Value: "billing-value", AllowedHosts: []string{"api.billing.example"}}, got["BILLING_TOKEN"])

	// The attack: billing names the operator's secret, another team's, default's stored one.
	for _, name := range []string{"OPS_TOKEN", "DEPLOY_TOKEN", "STORED_ONLY"} {
		_, err := src.Resolve(ctx, "billing", []string{"BILLING_TOKEN", name})
		require.Error(t, err, name)
		assert.Equal(t, "secret "+name+" is not set in namespace billing: store it with PUT /v1/namespaces/billing/secrets/"+name+
			" (the replicas' SCHEDULER_SECRET_* variables are the operator's: an admin grants one with PUT /v1/namespaces/billing {\"env_secrets\": [\""+name+"\"]})", err.Error())
	}
	_, err = src.Resolve(ctx, "default", []string{"NOPE"})
	assert.EqualError(t, err, "secret NOPE is not set in namespace default: store it with PUT /v1/namespaces/default/secrets/NOPE, or an operator sets SCHEDULER_SECRET_NOPE on every replica and an admin grants it with PUT /v1/namespaces/default {\"env_secrets\": [\"NOPE\"]}")
}

// A value replaced through the store is the one the next resolution returns: nothing is
// kept from one call to the next.
func TestResolveReadsTheCurrentValue(t *testing.T) {
	t.Parallel()
	db, box, src := setup(t)
	put(t, db, box, "billing", "BILLING_TOKEN", "rotated-value", "api.billing.example", "new.billing.example")
	got, err := src.Resolve(context.Background(), "billing", []string{"BILLING_TOKEN"})
	require.NoError(t, err)
	assert.Equal(t, "rotated-value", got["BILLING_TOKEN"].Value)
	assert.Equal(t, []string{"api.billing.example", "new.billing.example"}, got["BILLING_TOKEN"].AllowedHosts)
}

// Someone who may write scheduler_secrets but not read the key copies ops's sealed value
// into a billing row: it does not open there, and the call fails instead of sending it.
func TestASealedValueMovedToAnotherRowDoesNotOpen(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, _, src := setup(t)
	_, err := db.Pool.Exec(ctx, `
		INSERT INTO scheduler_secrets (namespace, name, key_id, sealed, allowed_hosts)
		SELECT 'billing', 'STOLEN', key_id, sealed, '{attacker.example}' FROM scheduler_secrets
		WHERE namespace = 'ops' AND name = 'DEPLOY_TOKEN'`)
	require.NoError(t, err)
	_, err = db.Pool.Exec(ctx, `
		UPDATE scheduler_secrets SET sealed = (SELECT sealed FROM scheduler_secrets WHERE namespace = 'ops' AND name = 'DEPLOY_TOKEN')
		WHERE namespace = 'billing' AND name = 'BILLING_TOKEN'`)
	require.NoError(t, err)
	for _, name := range []string{"STOLEN", "BILLING_TOKEN"} {
		_, err = src.Resolve(ctx, "billing", []string{name})
		var oe *seal.OpenError
		require.ErrorAs(t, err, &oe, name)
		assert.NotContains(t, err.Error(), "ops-value")
	}
}

func TestResolveWithoutTheKey(t *testing.T) {
	t.Parallel()
	db, _, _ := setup(t)
	_, err := secrets.New(nil, seal.New(nil), db.DB).Resolve(context.Background(), "billing", []string{"BILLING_TOKEN"})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "openssl rand -base64 32")
	_, err = secrets.New(nil, newBox(t), db.DB).Resolve(context.Background(), "billing", []string{"BILLING_TOKEN"})
	assert.Contains(t, err.Error(), "SCHEDULER_SECRET_KEY_PREVIOUS")
}

func TestLookupForTheCheck(t *testing.T) {
	t.Parallel()
	_, _, src := setup(t)
	lookup, err := src.Lookup(context.Background(), "billing")
	require.NoError(t, err)
	hosts, ok := lookup("billing", "BILLING_TOKEN")
	assert.True(t, ok)
	assert.Equal(t, []string{"api.billing.example"}, hosts)
	for _, q := range [][2]string{{"billing", "OPS_TOKEN"}, {"billing", "DEPLOY_TOKEN"}, {"ops", "DEPLOY_TOKEN"}} {
		_, ok := lookup(q[0], q[1])
		assert.False(t, ok, "%v", q)
	}
	lookup, err = src.Lookup(context.Background(), "default")
	require.NoError(t, err)
	hosts, ok = lookup("default", "OPS_TOKEN")
	assert.True(t, ok)
	assert.Nil(t, hosts, "an operator's secret goes to any host")
	hosts, ok = lookup("default", "STORED_ONLY")
	assert.True(t, ok)
	assert.Equal(t, []string{"a.example:8443"}, hosts)
}

// The environment's secrets are the operator's: a run resolves one only while an admin has
// granted it to the job's namespace, read at each run; namespace default, never set, has
// every one.
func TestOperatorSecretsFollowTheGrants(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, _, src := setup(t)

	_, err := src.Resolve(ctx, "billing", []string{"OPS_TOKEN"})
	require.ErrorContains(t, err, "secret OPS_TOKEN is not set in namespace billing")
	_, _, err = db.PutNamespace(ctx, store.Namespace{Name: "billing", EnvSecrets: &[]string{"OPS_TOKEN"}})
	require.NoError(t, err)
	got, err := src.Resolve(ctx, "billing", []string{"OPS_TOKEN", "BILLING_TOKEN"})
	require.NoError(t, err)
	assert.Equal(t, runtimejob.SecretValue{Value: "operator-value"}, got["OPS_TOKEN"], "granted: to any host")
	lookup, err := src.Lookup(ctx, "billing")
	require.NoError(t, err)
	_, ok := lookup("billing", "OPS_TOKEN")
	assert.True(t, ok)
	_, ok = lookup("billing", "SHARED")
	assert.False(t, ok, "not granted")

	// Default made explicit has only what it lists: its stored SHARED, no longer the operator's.
	_, _, err = db.PutNamespace(ctx, store.Namespace{Name: "default", EnvSecrets: &[]string{}})
	require.NoError(t, err)
	got, err = src.Resolve(ctx, "default", []string{"SHARED"})
	require.NoError(t, err)
	assert.Equal(t, runtimejob.SecretValue{Value: "stored-shared", AllowedHosts: []string{"a.example"}}, got["SHARED"])
	_, err = src.Resolve(ctx, "default", []string{"OPS_TOKEN"})
	require.ErrorContains(t, err, "secret OPS_TOKEN is not set in namespace default")
}
