package engine

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"log/slog"
	"testing"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schedulerhq/scheduler/internal/secrets"
	"github.com/schedulerhq/scheduler/internal/secrets/seal"
	"github.com/schedulerhq/scheduler/internal/store"
	"github.com/schedulerhq/scheduler/internal/targets/natstest"
)

// A NATS job's url_secret holds the server's URL with its password: the run publishes with
// it; a secret bound to another host is refused before any connection; a wrong password
// fails the run. No run record and no log line shows a password.
func TestNATSURLSecret(t *testing.T) {
	ctx := context.Background()
	db, url := newDB(t)
	_, _, err := db.PutNamespace(ctx, store.Namespace{Name: "billing"})
	require.NoError(t, err)
	srv := natstest.Start(t, func(o *server.Options) { o.Username, o.Password = "app", "right-pass-1" })
	srv.ClientOptions = append(srv.ClientOptions, nats.UserInfo("app", "right-pass-1"))
	stream := srv.AddStream(t, "BILLING", "billing.>")
	hostPort := srv.Addr().String()

	raw := make([]byte, seal.KeySize)
	_, err = rand.Read(raw)
	require.NoError(t, err)
	key, err := seal.ParseKey(base64.StdEncoding.EncodeToString(raw))
	require.NoError(t, err)
	box := seal.New(key)
	putSecret(t, db, box, "billing", "NATS_URL", "nats://app:right-pass-1@"+hostPort, "127.0.0.1")
	putSecret(t, db, box, "billing", "NATS_ELSEWHERE", "nats://app:right-pass-1@"+hostPort, "nats.example.com")
	putSecret(t, db, box, "billing", "NATS_WRONG", "nats://app:wrong-pass-2@"+hostPort, "127.0.0.1")

	var logs syncBuffer
	rt := runtimeFor(t, "127.0.0.1/32")
	rt.Secrets = secrets.New(nil, box, db.DB)
	n := startNode(t, url, "a", nodeOptions{runtime: rt,
		log: slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	awaitSignal(t, &n.en.testSignals.leading, "leading")
	for _, name := range []string{"publish", "elsewhere", "wrong"} {
		secret := map[string]string{"publish": "NATS_URL", "elsewhere": "NATS_ELSEWHERE", "wrong": "NATS_WRONG"}[name]
		createNamespacedDefinition(t, db, `{"name": "`+name+`", "namespace": "billing", "schedule": "0 0 1 1 *",
			"retry": {"max_attempts": 1}, "nats": {"url_secret": "`+secret+`", "subject": "billing.invoices"}}`)
		awaitSignal(t, &n.en.testSignals.definitionLoaded, "loaded")
	}

	r := awaitFinished(t, db, queueRun(t, db, "billing/publish"))
	require.Equal(t, store.StatusSucceeded, r.Status, "%v", r.Error)
	msgs := natstest.Messages(t, stream)
	require.Len(t, msgs, 1)
	assert.NotEmpty(t, msgs[0].MsgID)

	r = awaitFinished(t, db, queueRun(t, db, "billing/elsewhere"))
	assert.Equal(t, store.StatusFailed, r.Status)
	require.NotNil(t, r.Error)
	assert.Contains(t, *r.Error, "not attempted, nothing was sent: secret NATS_ELSEWHERE of namespace billing may be sent only to nats.example.com")

	r = awaitFinished(t, db, queueRun(t, db, "billing/wrong"))
	assert.Equal(t, store.StatusFailed, r.Status)
	require.NotNil(t, r.Error)
	assert.Contains(t, *r.Error, "the server refused the credentials")
	assert.Len(t, natstest.Messages(t, stream), 1, "only the allowed job published")

	var recorded string
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT coalesce(string_agg(coalesce(r.error, '') || coalesce(a.body, '') || coalesce(a.error, ''), ' '), '')
		FROM job_runs r LEFT JOIN run_attempts a ON a.run_id = r.id WHERE r.job LIKE 'billing/%'`).Scan(&recorded))
	for _, secret := range []string{"right-pass-1", "wrong-pass-2"} {
		assert.NotContains(t, recorded, secret)
		assert.NotContains(t, logs.String(), secret)
	}
	assert.Contains(t, logs.String(), "publish attempt", "the log was captured")
}
