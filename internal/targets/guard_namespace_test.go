package targets

import (
	"context"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A namespace's private host is its own: a job of another namespace is refused at the
// connection, even where the first namespace's call left a connection to it in the pool.
func TestNamespaceGuardRefusesAnotherNamespacesPrivateHost(t *testing.T) {
	var calls atomic.Int32
	srv := serve(t, func(w http.ResponseWriter, r *http.Request) { calls.Add(1) })
	port := strconv.Itoa(srv.Listener.Addr().(*net.TCPAddr).Port)
	operator := mustGuard(t, "127.0.0.1/32")
	operator.lookup = func(context.Context, string, string) ([]netip.Addr, error) {
		return []netip.Addr{netip.MustParseAddr("127.0.0.1")}, nil
	}
	teama, err := operator.Narrow("teama", []string{"127.0.0.1/32"})
	require.NoError(t, err)
	teamb, err := operator.Narrow("teamb", nil)
	require.NoError(t, err)
	c := NewCaller(Config{Guard: operator})
	url := "http://svc.internal:" + port + "/"

	res := c.Do(testCtx(t), Request{URL: url, Guard: teama, Retry: fastRetry})
	require.NoError(t, res.Err, "teama's own private host")
	res = c.Do(testCtx(t), Request{URL: url, Guard: teamb, Retry: fastRetry})
	require.Len(t, res.Attempts, 1)
	assert.Equal(t, "refused: svc.internal resolves to 127.0.0.1, a loopback address", res.Attempts[0].Error,
		"teamb's call dials anew, past teama's pooled connection, and is refused")
	res = c.Do(testCtx(t), Request{URL: "http://127.0.0.1:" + port + "/", Guard: teamb, Retry: fastRetry})
	assert.EqualError(t, res.Err, "not attempted: url host 127.0.0.1 is a loopback address; an admin can allow it in namespace teamb's http_allow (PUT /v1/namespaces/teamb), inside the operator's SCHEDULER_HTTP_ALLOW")
	assert.Equal(t, int32(1), calls.Load(), "only teama's call arrived")
	res = c.Do(testCtx(t), Request{URL: url, Retry: fastRetry})
	require.NoError(t, res.Err, "the operator's own guard (namespace default, never set)")
}

// SCHEDULER_HTTP_ALLOW bounds every namespace's http_allow: an entry outside it is refused,
// and a credentials address passes only where both lists name it; a metadata one never.
func TestNamespaceGuardStaysInsideTheOperators(t *testing.T) {
	operator := mustGuard(t, "10.1.0.0/16", "169.254.0.0/16", "receiver.internal")
	_, err := operator.Narrow("teama", []string{"10.0.0.0/8", "10.1.2.3", "receiver.internal", "other.internal"})
	assert.EqualError(t, err, "10.0.0.0/8, other.internal not inside the operator's SCHEDULER_HTTP_ALLOW (10.1.0.0/16, 169.254.0.0/16, receiver.internal): an operator must allow it there first")
	_, err = operator.Narrow("teama", []string{"10.1.0.0/8x"})
	assert.ErrorContains(t, err, `http_allow: "10.1.0.0/8x" is not a CIDR`)

	g, err := operator.Narrow("teama", []string{"10.1.2.0/24", "169.254.170.2", "169.254.169.254"})
	require.NoError(t, err)
	assert.Equal(t, []string{"10.1.2.0/24", "169.254.169.254", "169.254.170.2"}, g.Entries())
	require.NoError(t, g.CheckURL("http://10.1.2.9/"))
	assert.EqualError(t, g.CheckURL("http://10.1.3.9/"), "url host 10.1.3.9 is a private address; an admin can allow it in namespace teama's http_allow (PUT /v1/namespaces/teama), inside the operator's SCHEDULER_HTTP_ALLOW")
	assert.EqualError(t, g.CheckURL("http://169.254.170.2/"),
		"url host 169.254.170.2 is a container credentials address (ECS task roles, EKS Pod Identity), allowed only when an operator names it in SCHEDULER_HTTP_ALLOW",
		"the namespace names it, the operator only covers it with a wider range")
	assert.EqualError(t, g.CheckURL("http://169.254.169.254/"), "url host 169.254.169.254 is a cloud metadata address, which is never allowed")

	named := mustGuard(t, "169.254.170.2/32")
	g, err = named.Narrow("teama", []string{"169.254.170.2"})
	require.NoError(t, err)
	assert.NoError(t, g.CheckURL("http://169.254.170.2/"), "both lists name it")
	g, err = named.Narrow("teamb", nil)
	require.NoError(t, err)
	assert.ErrorContains(t, g.CheckURL("http://169.254.170.2/"), "allowed only when namespace teamb's http_allow and the operator's SCHEDULER_HTTP_ALLOW name it")
}
