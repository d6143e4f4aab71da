package targets

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/url"

	"github.com/schedulerhq/scheduler/internal/secrets/allowedhosts"
)

// A stored secret may be sent only to the hosts its allowed_hosts list. The runner checks
// the job's URL before it calls; the caller checks again where the bytes actually go: on
// every request it sends (a connection taken from the pool included) and on every
// connection it dials, against the host and port of that request or dial. So a URL that
// changed between the runner's check and the call, or a redirect if one were ever followed,
// cannot carry a secret, or an HMAC made with a signing secret, to another host.

// AllowedHosts are the hosts one stored secret may be sent to ("host" or "host:port",
// internal/secrets/allowedhosts's normal form).
type AllowedHosts struct {
	Secret string
	Hosts  []string
}

// HostNotAllowedError is a connection refused because a secret of the call may not go to
// its host. Nothing was sent.
type HostNotAllowedError struct {
	Secret string
	Hosts  []string
	Addr   string // the host:port refused
}

func (e *HostNotAllowedError) Error() string {
	return fmt.Sprintf("refused: secret %s may be sent only to %s, and this call connects to %s",
		e.Secret, allowedhosts.Describe(e.Hosts), e.Addr)
}

type allowedHostsKey struct{}

// withAllowedHosts hands a call's lists to its requests and dials, which read them from the
// context (the transport passes the request's context values on to its dials).
func withAllowedHosts(ctx context.Context, lists []AllowedHosts) context.Context {
	if len(lists) == 0 {
		return ctx
	}
	return context.WithValue(ctx, allowedHostsKey{}, lists)
}

// allowedHostsOf returns the lists withAllowedHosts put in ctx; none for a call that
// carries no stored secret, which is then checked no further.
func allowedHostsOf(ctx context.Context) []AllowedHosts {
	lists, _ := ctx.Value(allowedHostsKey{}).([]AllowedHosts)
	return lists
}

// checkAllowedHosts refuses addr ("host:port") unless every one of lists allows it.
func checkAllowedHosts(lists []AllowedHosts, addr string) error {
	if len(lists) == 0 {
		return nil
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return &HostNotAllowedError{Secret: lists[0].Secret, Hosts: lists[0].Hosts, Addr: addr}
	}
	for _, l := range lists {
		if !allowedhosts.Match(l.Hosts, host, port) {
			return &HostNotAllowedError{Secret: l.Secret, Hosts: l.Hosts, Addr: addr}
		}
	}
	return nil
}

// dial is the transport's DialContext: the allowed hosts, then the outbound guard g.
func (c *Caller) dial(ctx context.Context, g *Guard, network, addr string) (net.Conn, error) {
	if err := checkAllowedHosts(allowedHostsOf(ctx), addr); err != nil {
		return nil, err
	}
	return g.DialContext(ctx, network, addr)
}

// allowedHostsTransport checks each request's host and port before the transport sends it,
// on a new connection or a pooled one.
type allowedHostsTransport struct{ next http.RoundTripper }

func (t allowedHostsTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if lists := allowedHostsOf(req.Context()); len(lists) > 0 {
		if err := checkAllowedHosts(lists, requestAddr(req.URL)); err != nil {
			if req.Body != nil {
				req.Body.Close() // a RoundTripper closes the body, even on error
			}
			return nil, err
		}
	}
	return t.next.RoundTrip(req)
}

// requestAddr is the host:port a request's URL connects to, as the transport pools it.
func requestAddr(u *url.URL) string {
	host, port, _ := allowedhosts.FromURL(u.String())
	return net.JoinHostPort(host, port)
}
