package engine

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schedulerhq/scheduler/internal/secrets"
	"github.com/schedulerhq/scheduler/internal/secrets/seal"
	"github.com/schedulerhq/scheduler/internal/store"
	"github.com/schedulerhq/scheduler/internal/testdb"
)

// putSecret seals and stores a secret as the API does.
func putSecret(t *testing.T, db *testdb.DB, box *seal.Box, ns, name, value string, hosts ...string) {
	t.Helper()
	id, sealed, err := box.Seal(ns, name, []byte(value))
	require.NoError(t, err)
	_, _, err = db.PutSecret(context.Background(), store.SealedSecret{
		Secret: store.Secret{Namespace: ns, Name: name, KeyID: id, AllowedHosts: hosts}, Sealed: sealed})
	require.NoError(t, err)
}

// createNamespacedDefinition stores a runtime job under its key, as the API stores a job of
// a namespace: written by hand, it is not checked against the namespace's secrets, as a row
// an older version (or a person) wrote would not be.
func createNamespacedDefinition(t *testing.T, db *testdb.DB, js string) {
	t.Helper()
	j := checkDefinition(t, js)
	b, err := json.Marshal(j.Def)
	require.NoError(t, err)
	_, err = db.CreateDefinition(context.Background(), j.Def.Key(), j.Def.Kind(), b, 10_000)
	require.NoError(t, err)
}

// A stored secret replaced through the API is the one the next run sends, without a restart;
// a job of namespace billing that names another namespace's secret, or the operator's, fails
// its run saying which namespace lacks which secret and how to set it, and sends nothing.
func TestStoredSecretsAreResolvedByNamespaceAtEachRun(t *testing.T) {
	ctx := context.Background()
	db, url := newDB(t)
	for _, ns := range []string{"billing", "ops"} {
		_, _, err := db.PutNamespace(ctx, store.Namespace{Name: ns})
		require.NoError(t, err)
	}
	raw := make([]byte, seal.KeySize)
	_, err := rand.Read(raw)
	require.NoError(t, err)
	key, err := seal.ParseKey(base64.StdEncoding.EncodeToString(raw))
	require.NoError(t, err)
	box := seal.New(key)
	putSecret(t, db, box, "billing", "TOKEN", "first-value", "127.0.0.1")
	putSecret(t, db, box, "ops", "DEPLOY_TOKEN", "ops-value", "127.0.0.1")

	var mu sync.Mutex
	var got []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		got = append(got, r.URL.Path+" "+r.Header.Get("Authorization"))
	}))
	t.Cleanup(srv.Close)
	received := func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), got...)
	}
	var logs syncBuffer
	rt := runtimeFor(t, "127.0.0.1/32")
	rt.Secrets = secrets.New(map[string]string{"OPS_TOKEN": "operator-value"}, box, db.DB)
	n := startNode(t, url, "a", nodeOptions{runtime: rt,
		log: slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	awaitSignal(t, &n.en.testSignals.leading, "leading")
	for _, def := range []string{
		`{"name": "echo", "namespace": "billing", "schedule": "0 0 1 1 *", "http": {"url": "` + srv.URL + `/echo", "auth": {"bearer_secret": "TOKEN"}}}`,
		`{"name": "steal-ops", "namespace": "billing", "schedule": "0 0 1 1 *", "http": {"url": "` + srv.URL + `/steal", "auth": {"bearer_secret": "DEPLOY_TOKEN"}}}`,
		`{"name": "steal-env", "namespace": "billing", "schedule": "0 0 1 1 *", "http": {"url": "` + srv.URL + `/steal", "auth": {"bearer_secret": "OPS_TOKEN"}}}`,
	} {
		createNamespacedDefinition(t, db, def)
		awaitSignal(t, &n.en.testSignals.definitionLoaded, "loaded")
	}

	r := awaitFinished(t, db, queueRun(t, db, "billing/echo"))
	require.Equal(t, store.StatusSucceeded, r.Status, "%v", r.Error)
	putSecret(t, db, box, "billing", "TOKEN", "second-value", "127.0.0.1")
	r = awaitFinished(t, db, queueRun(t, db, "billing/echo"))
	require.Equal(t, store.StatusSucceeded, r.Status, "%v", r.Error)
	assert.Equal(t, []string{"/echo Bearer first-value", "/echo Bearer second-value"}, received(),
		"the next run sends the value stored since, with no restart")

	for job, name := range map[string]string{"billing/steal-ops": "DEPLOY_TOKEN", "billing/steal-env": "OPS_TOKEN"} {
		r := awaitFinished(t, db, queueRun(t, db, job))
		assert.Equal(t, store.StatusFailed, r.Status)
		require.NotNil(t, r.Error)
		assert.Equal(t, "secret "+name+" is not set in namespace billing: store it with PUT /v1/namespaces/billing/secrets/"+name+
			" (the replicas' SCHEDULER_SECRET_* variables are the operator's: an admin grants one with PUT /v1/namespaces/billing {\"env_secrets\": [\""+name+"\"]})", *r.Error)
	}
	assert.Len(t, received(), 2, "nothing was sent by the jobs naming what is not theirs")
	for _, v := range []string{"first-value", "second-value", "ops-value", "operator-value"} {
		assert.NotContains(t, logs.String(), v)
	}
	assert.Contains(t, logs.String(), "run finished", "the log was captured")
}
