package targets

import (
	"context"
	"errors"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A call carrying a stored secret connects only to a host the secret allows: a Request whose
// URL names another host (a definition changed under the runner, a bug upstream) is refused
// by the caller itself, and nothing reaches that host.
func TestCallerRefusesAHostOutsideTheSecretsAllowedHosts(t *testing.T) {
	t.Parallel()
	var calls atomic.Int32
	srv := serve(t, func(w http.ResponseWriter, r *http.Request) { calls.Add(1) })
	c := loopbackCaller(t, Config{})
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(srv.URL, "http://"))

	res := c.Do(testCtx(t), Request{URL: srv.URL + "/", Retry: fastRetry,
		Header:       http.Header{"Authorization": {"Bearer billing-value"}},
		AllowedHosts: []AllowedHosts{{Secret: "BILLING_TOKEN", Hosts: []string{"api.billing.example", "127.0.0.1:1"}}}})
	require.Error(t, res.Err)
	assert.Zero(t, calls.Load(), "nothing was sent")
	assert.Contains(t, res.Err.Error(), "not retryable", "a refusal is not retried")
	assert.Contains(t, res.Err.Error(), "secret BILLING_TOKEN may be sent only to api.billing.example, 127.0.0.1:1")
	assert.Contains(t, res.Err.Error(), "127.0.0.1:"+port)
	require.Len(t, res.Attempts, 1)

	// Every secret's list must allow the host: one that does not refuses the call.
	res = c.Do(testCtx(t), Request{URL: srv.URL + "/", AllowedHosts: []AllowedHosts{
		{Secret: "A", Hosts: []string{"127.0.0.1"}}, {Secret: "B", Hosts: []string{"api.billing.example"}}}})
	require.Error(t, res.Err)
	assert.Contains(t, res.Err.Error(), "secret B may be sent only to")
	assert.Zero(t, calls.Load())

	res = c.Do(testCtx(t), Request{URL: srv.URL + "/", AllowedHosts: []AllowedHosts{
		{Secret: "A", Hosts: []string{"127.0.0.1"}}, {Secret: "B", Hosts: []string{"127.0.0.1:" + port}}}})
	require.NoError(t, res.Err)
	assert.Equal(t, int32(1), calls.Load(), "a host every secret allows is called")
}

// The dial itself checks the host and port it connects to, whatever the request's URL
// said: the check that holds even if a connection is asked for on another path.
func TestDialRefusesAHostOutsideTheAllowedHosts(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { l.Close() })
	accepted := make(chan struct{}, 1)
	go func() {
		if conn, err := l.Accept(); err == nil {
			accepted <- struct{}{}
			conn.Close()
		}
	}()
	c := loopbackCaller(t, Config{})
	ctx := withAllowedHosts(context.Background(), []AllowedHosts{{Secret: "X", Hosts: []string{"api.example.com"}}})
	_, err = c.dial(ctx, c.guard, "tcp", l.Addr().String())
	var refused *HostNotAllowedError
	require.True(t, errors.As(err, &refused), "got %v", err)
	assert.Equal(t, "X", refused.Secret)
	select {
	case <-accepted:
		t.Fatal("the dial connected")
	default:
	}

	conn, err := c.dial(withAllowedHosts(context.Background(), []AllowedHosts{{Secret: "X", Hosts: []string{"127.0.0.1"}}}), c.guard, "tcp", l.Addr().String())
	require.NoError(t, err, "an allowed host is dialled")
	conn.Close()
}
