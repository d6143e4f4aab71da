package targets

import (
	"context"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schedulerhq/scheduler/internal/targets/natstest"
)

func natsRequest(url, key string) Request {
	return Request{Job: "tick", Namespace: "default", URL: url, Subject: "ticks.every-second", Body: []byte(`{"n":1}`),
		IdempotencyKey: key, RunID: 7, ScheduledAt: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC),
		AttemptTimeout: 5 * time.Second, Retry: fastRetry}
}

// A slot's message is published with its key as Nats-Msg-Id and the scheduler's headers;
// publishing the same key again (a retry, a recovery) is acknowledged as a duplicate,
// counts as success, and leaves one message in the stream.
func TestPublishOncePerKey(t *testing.T) {
	srv := natstest.Start(t)
	st := srv.AddStream(t, "TICKS", "ticks.>")
	var classes []string
	c := loopbackCaller(t, Config{OnCall: func(_, class string, _ time.Duration) { classes = append(classes, class) }})

	first := c.Publish(testCtx(t), natsRequest(srv.URL, "key-1"))
	require.NoError(t, first.Err)
	require.Len(t, first.Attempts, 1)
	assert.Contains(t, first.Attempts[0].Body, "acknowledged: stream TICKS, sequence 1")
	again := c.Publish(testCtx(t), natsRequest(srv.URL, "key-1"))
	require.NoError(t, again.Err, "a duplicate ack is a success")
	assert.Contains(t, again.Attempts[0].Body, "duplicate")
	require.NoError(t, c.Publish(testCtx(t), natsRequest(srv.URL, "key-2")).Err)

	msgs := natstest.Messages(t, st)
	require.Len(t, msgs, 2, "one message per key")
	assert.Equal(t, "key-1", msgs[0].MsgID)
	assert.Equal(t, "key-2", msgs[1].MsgID)
	assert.Equal(t, `{"n":1}`, msgs[0].Data)
	assert.Equal(t, "ticks.every-second", msgs[0].Subject)
	assert.Equal(t, "7", msgs[0].Header.Get("X-Scheduler-Run-Id"))
	assert.Equal(t, "2026-01-02T03:04:05Z", msgs[0].Header.Get("X-Scheduler-Scheduled-At"))
	assert.Equal(t, "1", msgs[0].Header.Get("X-Scheduler-Attempt"))
	assert.Equal(t, []string{PublishAcked, PublishAcked, PublishAcked}, classes)
}

// A subject no stream captures is retried (a stream may be being created) and fails
// saying what to create.
func TestPublishWithoutStreamFails(t *testing.T) {
	srv := natstest.Start(t)
	res := loopbackCaller(t, Config{}).Publish(testCtx(t), natsRequest(srv.URL, "key-1"))
	require.Error(t, res.Err)
	assert.Len(t, res.Attempts, fastRetry.MaxAttempts)
	assert.Contains(t, res.Err.Error(), "no stream acknowledged subject ticks.every-second: create a JetStream stream")
}

// The attack: a definition names a NATS server inside the scheduler's network. A literal
// private address is refused before any attempt; a name that resolves to one is refused at
// dial time, nothing connected; a secret's URL goes only to the secret's hosts.
func TestPublishGuarded(t *testing.T) {
	srv := natstest.Start(t)
	_, port, err := net.SplitHostPort(strings.TrimPrefix(srv.URL, "nats://"))
	require.NoError(t, err)
	connections := func() uint64 {
		v, err := srv.Varz(nil)
		require.NoError(t, err)
		return v.TotalConnections
	}
	before := connections()

	refusing := NewCaller(Config{Guard: mustGuard(t)})
	res := refusing.Publish(testCtx(t), natsRequest(srv.URL, "k"))
	require.Error(t, res.Err)
	assert.Empty(t, res.Attempts)
	assert.Contains(t, res.Err.Error(), "not attempted: url host 127.0.0.1 is a loopback address")

	g := mustGuard(t)
	g.lookup = func(context.Context, string, string) ([]netip.Addr, error) {
		return []netip.Addr{netip.MustParseAddr("127.0.0.1")}, nil
	}
	res = NewCaller(Config{Guard: g}).Publish(testCtx(t), natsRequest("nats://nats.example.com:"+port, "k"))
	require.Error(t, res.Err)
	require.Len(t, res.Attempts, 1, "a refused address is not retried")
	assert.Contains(t, res.Attempts[0].Error, "refused: nats.example.com resolves to 127.0.0.1, a loopback address")

	r := natsRequest("nats://u:p@"+strings.TrimPrefix(srv.URL, "nats://"), "k")
	r.AllowedHosts = []AllowedHosts{{Secret: "NATS_URL", Hosts: []string{"nats.example.com"}}}
	res = loopbackCaller(t, Config{}).Publish(testCtx(t), r)
	require.Error(t, res.Err)
	assert.Contains(t, res.Err.Error(), "secret NATS_URL may be sent only to nats.example.com")
	assert.NotContains(t, res.Err.Error(), "u:p")

	// A secret's URL on a localhost name: the refusal names the address to use, not the
	// URL's password.
	res = loopbackCaller(t, Config{}).Publish(testCtx(t), natsRequest("nats://u:pw-in-url@localhost:"+port, "k"))
	require.Error(t, res.Err)
	assert.Contains(t, res.Err.Error(), "use the address it names: nats://127.0.0.1:"+port)
	assert.NotContains(t, res.Err.Error(), "pw-in-url")

	assert.Equal(t, before, connections(), "no connection reached the server")
}

// Wrong credentials fail without retry and without the password in any word recorded.
func TestPublishAuthorizationRefused(t *testing.T) {
	srv := natstest.Start(t, func(o *server.Options) { o.Username, o.Password = "app", "s3cret-pass" })
	url := "nats://app:wrong-pass@" + strings.TrimPrefix(srv.URL, "nats://")
	res := loopbackCaller(t, Config{}).Publish(testCtx(t), natsRequest(url, "k"))
	require.Error(t, res.Err)
	require.Len(t, res.Attempts, 1, "credentials do not become right by asking again")
	assert.Contains(t, res.Attempts[0].Error, "the server refused the credentials")
	assert.NotContains(t, res.Err.Error(), "wrong-pass")
	assert.NotContains(t, res.Attempts[0].Error, "wrong-pass")
}

// CheckNATSURL refuses what a NATS job may not name, each in words that say what to write.
func TestCheckNATSURL(t *testing.T) {
	g := mustGuard(t)
	for raw, want := range map[string]string{
		"nats.example.com:4222":         "needs a scheme",
		"https://nats.example.com":      "not a NATS one",
		"nats://nats.example.com/x":     "without a path",
		"nats://u:p@nats.example.com":   "must not contain credentials",
		"nats://10.0.0.5:4222":          "a private address",
		"tls://localhost:4222":          "loopback name",
		"nats://nats.example.com:99999": "not a port number",
		"nats://169.254.169.254:4222":   "never allowed",
	} {
		err := g.CheckNATSURL(raw)
		if assert.Error(t, err, raw) {
			assert.Contains(t, err.Error(), want, raw)
		}
	}
	assert.NoError(t, g.CheckNATSURL("nats://nats.example.com"))
	assert.NoError(t, g.CheckNATSURL("tls://nats.example.com:4443"))
}

// A NATS job's publishes share its namespace's max_concurrent_calls with its HTTP calls:
// with billing's one slot held by a call, a publish waits, and at its run's deadline fails
// saying the bound was reached, nothing published.
func TestPublishSharesTheNamespaceBound(t *testing.T) {
	srv := natstest.Start(t)
	st := srv.AddStream(t, "TICKS", "ticks.>")
	arrived, release := make(chan struct{}, 1), make(chan struct{})
	httpSrv := serve(t, func(w http.ResponseWriter, r *http.Request) {
		arrived <- struct{}{}
		<-release
	})
	c := loopbackCaller(t, Config{})
	c.SetNamespaceLimits(map[string]int{"billing": 1})
	done := make(chan error, 1)
	go func() { done <- c.Do(testCtx(t), Request{Namespace: "billing", URL: httpSrv.URL}).Err }()
	<-arrived

	r := natsRequest(srv.URL, "k")
	r.Namespace, r.Deadline = "billing", time.Now().Add(200*time.Millisecond)
	res := c.Publish(testCtx(t), r)
	require.Error(t, res.Err)
	assert.Contains(t, res.Err.Error(), "namespace billing's max_concurrent_calls (1) was reached")
	assert.Empty(t, natstest.Messages(t, st))
	close(release)
	require.NoError(t, <-done)
}
