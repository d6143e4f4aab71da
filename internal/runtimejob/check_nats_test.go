package runtimejob_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schedulerhq/scheduler/internal/runtimejob"
	"github.com/schedulerhq/scheduler/internal/targets"
)

// natsEnv checks NATS URLs with the real guard of an operator who allowed nothing private.
func natsEnv(t *testing.T) runtimejob.Env {
	g, err := targets.NewGuard(nil)
	require.NoError(t, err)
	e := env()
	e.CheckNATSURL = g.CheckNATSURL
	return e
}

// A NATS job is checked as a whole: its normal form keeps its target, fills in the retry
// policy, and its kind is nats.
func TestCheckNATSJob(t *testing.T) {
	j, errs := runtimejob.Check(decode(t, `{"name": "tick", "schedule": "@every 1s",
		"nats": {"url": "nats://nats.example.com:4222", "subject": "ticks.every-second", "body": "{}"}}`), natsEnv(t))
	require.Empty(t, errs)
	assert.Equal(t, runtimejob.KindNATS, j.Def.Kind())
	assert.Equal(t, "ticks.every-second", j.Def.NATS.Subject)
	assert.Equal(t, 3, j.Def.Retry.MaxAttempts)

	j, errs = runtimejob.Check(decode(t, `{"name": "tick", "schedule": "@every 1s",
		"nats": {"url_secret": "BILLING_TOKEN", "subject": "ticks"}}`), natsEnv(t))
	require.Empty(t, errs)
	assert.Equal(t, []string{"BILLING_TOKEN"}, j.Def.CallSecrets())
}

// The attacks a definition can try through a NATS target, each refused at once with the
// others: a private server, credentials in the stored (and shown) URL, a secret the
// namespace lacks, the server's and JetStream's own API subjects ($JS.API.STREAM.DELETE),
// another client's reply inbox, a wildcard, an oversized body, and two targets at once.
func TestCheckNATSRefusesEveryProblemAtOnce(t *testing.T) {
	for _, c := range []struct{ def, field, want string }{
		{`{"url": "nats://10.0.0.5:4222", "subject": "a"}`, "nats.url", "a private address"},
		{`{"url": "nats://app:pw@nats.example.com", "subject": "a"}`, "nats.url", "must not contain credentials"},
		{`{"url": "https://nats.example.com", "subject": "a"}`, "nats.url", "not a NATS one"},
		{`{"url_secret": "NOPE", "subject": "a"}`, "nats.url_secret", "secret NOPE is not set in namespace default"},
		{`{"url": "nats://a.example.com", "url_secret": "BILLING_TOKEN", "subject": "a"}`, "nats.url", "either url or url_secret"},
		{`{"subject": "a"}`, "nats.url", "required"},
		{`{"url": "nats://a.example.com", "subject": "$JS.API.STREAM.DELETE.ORDERS"}`, "nats.subject", "JetStream's own API"},
		{`{"url": "nats://a.example.com", "subject": "_INBOX.abc"}`, "nats.subject", "other clients' replies"},
		{`{"url": "nats://a.example.com", "subject": "orders.*"}`, "nats.subject", "wildcard"},
		{`{"url": "nats://a.example.com", "subject": "orders.>"}`, "nats.subject", "wildcard"},
		{`{"url": "nats://a.example.com", "subject": "orders..x"}`, "nats.subject", "empty token"},
		{`{"url": "nats://a.example.com", "subject": "a b"}`, "nats.subject", "without spaces"},
		{`{"url": "nats://a.example.com"}`, "nats.subject", "required"},
		{`{"url": "nats://a.example.com", "subject": "a", "body": "` + strings.Repeat("x", runtimejob.MaxBody+1) + `"}`, "nats.body", "at most 65536"},
	} {
		_, errs := runtimejob.Check(decode(t, `{"name": "tick", "schedule": "@every 1s", "nats": `+c.def+`}`), natsEnv(t))
		assert.Contains(t, fields(errs)[c.field], c.want, c.def)
	}
	// Every problem at once, beside the other fields'.
	_, errs := runtimejob.Check(decode(t, `{"name": "Bad", "schedule": "@every 1s", "sql": {"target": "APP", "statements": "SELECT 1"},
		"nats": {"url": "nats://10.0.0.5", "subject": "$SYS.x"}}`), natsEnv(t))
	got := fields(errs)
	assert.Contains(t, got, "name")
	assert.Contains(t, got["http"], `exactly one target: "http", "sql", "nats" or "river"`)

	_, errs = runtimejob.Check(decode(t, `{"name": "tick", "schedule": "@every 1s",
		"nats": {"url": "nats://10.0.0.5", "subject": "$SYS.x", "body": "a\u0000"}}`), natsEnv(t))
	got = fields(errs)
	assert.Len(t, got, 3, "url, subject and body together: %v", got)

	// A stored definition is loaded without the guard, and still never keeps a password.
	_, _, err := runtimejob.Load([]byte(`{"name": "tick", "schedule": "@every 1s", "nats": {"url": "nats://u:p@a.example.com", "subject": "a"}}`))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "must not contain credentials")
}
