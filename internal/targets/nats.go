package targets

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/schedulerhq/scheduler/internal/tracing"
)

// A NATS job's call is a JetStream publish: the message goes to a subject, a stream that
// captures the subject stores it and acknowledges it (a PubAck). The message carries the
// slot's key as Nats-Msg-Id, the same on every attempt and every recovery of the slot, so
// the stream's duplicate window drops a repeat and acknowledges it as a duplicate, which
// counts as success: the slot's message is in the stream once.
//
// The server is a host a user typed, reached from inside the scheduler's network, so it
// is guarded as an HTTP target is: the URL is checked when the definition is written and
// before each attempt, every connection is dialled through the namespace's guard (after
// resolution, on the address connected to), and a secret's URL only to the hosts the
// secret is bound to. A server cannot lead the client elsewhere: the servers it
// advertises are ignored and the client never reconnects, one connection per attempt.

// NATSPortDefault is the port of a NATS URL that names none.
const NATSPortDefault = "4222"

// natsSchemes are the schemes of a NATS server URL: plain, or TLS from the start of the
// session (a plain URL is upgraded too when the server requires TLS).
var natsSchemes = []string{"nats", "tls"}

// CheckNATSURL is the static check of a NATS server URL written in a definition: scheme
// nats:// or tls://, a host checked as an HTTP target's, an optional port, nothing else
// (no path, no query, and no user:password@, which belongs in a secret: url_secret).
func (g *Guard) CheckNATSURL(raw string) error {
	u, err := g.checkNATSURL(raw)
	if err == nil && u.User != nil {
		return errors.New("url must not contain credentials (user:password@ or token@): store the whole URL in a secret and name it in url_secret")
	}
	return err
}

// checkNATSURL parses and checks a NATS server URL, credentials allowed (a URL from a
// secret). No message quotes the URL: it may hold a password.
func (g *Guard) checkNATSURL(raw string) (*url.URL, error) {
	scheme, _, ok := strings.Cut(raw, "://")
	if !ok {
		return nil, errors.New("the url needs a scheme: nats://host:4222 or tls://host:4222")
	}
	u, err := url.Parse(raw)
	if err != nil {
		return nil, errors.New("the url does not parse: write it as nats://host:4222")
	}
	switch {
	case !slices.ContainsFunc(natsSchemes, func(s string) bool { return strings.EqualFold(s, scheme) }):
		return nil, fmt.Errorf("url scheme %q is not a NATS one: use nats:// or tls://", truncate(scheme, 16))
	case u.Path != "" && u.Path != "/", u.RawQuery != "", u.Fragment != "", u.Opaque != "":
		return nil, errors.New("a NATS url is a server and a port only, without a path or a query: nats://host:4222")
	}
	if p := u.Port(); p != "" {
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
			return nil, fmt.Errorf("port %q is not a port number (1 to 65535)", truncate(p, 8))
		}
	}
	return u, g.checkURLHost(u)
}

// natsAddr is the host:port a NATS URL connects to.
func natsAddr(u *url.URL) string {
	port := u.Port()
	if port == "" {
		port = NATSPortDefault
	}
	return net.JoinHostPort(u.Hostname(), port)
}

// Publish publishes r.Body to r.Subject on the NATS server at r.URL, with JetStream's
// acknowledgement, trying as r.Retry allows under the same bounds as an HTTP call (the
// caller's, the host's, the job's and the namespace's). Method and Success are not used.
func (c *Caller) Publish(ctx context.Context, r Request) Result {
	guard := r.Guard
	if guard == nil {
		guard = c.guard
	}
	u, err := guard.checkNATSURL(r.URL)
	if err != nil {
		return Result{Err: fmt.Errorf("not attempted: %w", err)}
	}
	if err := checkAllowedHosts(r.AllowedHosts, natsAddr(u)); err != nil {
		return Result{Err: fmt.Errorf("not attempted, nothing was sent: %w", err)}
	}
	r.Guard = guard
	return c.try(ctx, &r, normalHost(u.Hostname()), c.publish)
}

// publish makes try number n of a NATS publish: connect, publish, wait for the ack, close.
func (c *Caller) publish(ctx context.Context, r *Request, n int) (a Attempt, retryAfter time.Duration) {
	timeout := cmpOr(r.AttemptTimeout, attemptTimeoutDefault)
	spanCtx, span := traceAttempt(ctx, r, n)
	attemptCtx, cancel := context.WithTimeout(spanCtx, timeout)
	defer cancel()
	a = Attempt{Number: n, StartedAt: time.Now()}
	defer func() { a.Duration = time.Since(a.StartedAt); endAttempt(span, a) }()

	d := &natsDialer{ctx: attemptCtx, guard: r.Guard, allowed: r.AllowedHosts, roots: c.conf.NATSRootCAs}
	nc, err := nats.Connect(r.URL, nats.Name("scheduler"), nats.SetCustomDialer(d),
		// The dialer resolves and checks; a server's advertised peers and a reconnection
		// would be connections the definition did not name.
		nats.SkipHostLookup(), nats.IgnoreDiscoveredServers(), nats.NoReconnect(), nats.DontRandomize(),
		nats.Timeout(min(timeout, dialTimeout+tlsHandshakeTimeout)),
		nats.ErrorHandler(func(*nats.Conn, *nats.Subscription, error) {}), nats.NoCallbacksAfterClientClose())
	if err != nil {
		a.Error, a.Retryable = d.describe(ctx, attemptCtx, err, timeout)
		return a, 0
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		a.Error, a.Retryable = "cannot use JetStream: "+err.Error(), false
		return a, 0
	}
	msg := &nats.Msg{Subject: r.Subject, Data: r.Body, Header: natsHeader(r, n)}
	tracing.Inject(spanCtx, http.Header(msg.Header))
	ack, err := js.PublishMsg(attemptCtx, msg, jetstream.WithMsgID(r.IdempotencyKey))
	switch {
	case err == nil && ack.Duplicate:
		a.Body = cleanUTF8([]byte(fmt.Sprintf("acknowledged as a duplicate: stream %s already holds this slot's message (sequence %d)", ack.Stream, ack.Sequence)))
	case err == nil:
		a.Body = cleanUTF8([]byte(fmt.Sprintf("acknowledged: stream %s, sequence %d", ack.Stream, ack.Sequence)))
	case errors.Is(err, jetstream.ErrNoStreamResponse):
		a.Error, a.Retryable = "no stream acknowledged subject "+r.Subject+": create a JetStream stream whose subjects include it", true
	default:
		a.Error, a.Retryable = d.describe(ctx, attemptCtx, err, timeout)
	}
	return a, 0
}

// natsHeader is the message's headers: the scheduler's own, as an HTTP call carries them
// (Nats-Msg-Id is set by the publish), none a definition can forge.
func natsHeader(r *Request, n int) nats.Header {
	h := nats.Header{}
	if r.RunID != 0 {
		h.Set("X-Scheduler-Run-Id", strconv.FormatInt(r.RunID, 10))
	}
	h.Set("X-Scheduler-Attempt", strconv.Itoa(n))
	if !r.ScheduledAt.IsZero() {
		h.Set("X-Scheduler-Scheduled-At", r.ScheduledAt.UTC().Format(time.RFC3339Nano))
	}
	return h
}

// natsDialer dials the connections of one attempt through the guard, checking the hosts a
// secret in the URL may go to first; it keeps its last error, which the client words as
// "no servers available" only.
type natsDialer struct {
	ctx     context.Context
	guard   *Guard
	allowed []AllowedHosts

	roots *x509.CertPool

	mu   sync.Mutex
	err  error
	conn *natsConn // the last connection made
	addr string    // and the host:port it was dialled as
}

func (d *natsDialer) Dial(network, addr string) (net.Conn, error) {
	conn, err := d.dial(network, addr)
	d.mu.Lock()
	defer d.mu.Unlock()
	if err != nil {
		d.err = err
		return nil, err
	}
	d.conn, d.addr = &natsConn{Conn: conn}, addr
	return d.conn, nil
}

func (d *natsDialer) dial(network, addr string) (net.Conn, error) {
	if err := checkAllowedHosts(d.allowed, addr); err != nil {
		return nil, err
	}
	return d.guard.DialContext(d.ctx, network, addr)
}

// describe words a failed connect or publish for the run's history: the dial's own error
// when the connection was not made, in the words of an HTTP call's.
func (d *natsDialer) describe(ctx, attemptCtx context.Context, err error, timeout time.Duration) (string, bool) {
	d.mu.Lock()
	dialErr := d.err
	var connErr error
	if d.conn != nil {
		connErr = d.conn.failed()
	}
	d.mu.Unlock()
	if dialErr != nil {
		return describeError(ctx, attemptCtx, dialErr, timeout)
	}
	if connErr != nil { // a server that broke the protocol, or a TLS session not made
		return cleanUTF8([]byte(connErr.Error())), !errors.Is(connErr, ErrNATSProtocol)
	}
	var apiErr *jetstream.APIError
	switch {
	case errors.As(err, &apiErr):
		// The stream refused the message (e.g. a full stream): its words, bounded.
		return cleanUTF8([]byte("the stream refused the message: " + apiErr.Error())), true
	case errors.Is(err, nats.ErrAuthorization), errors.Is(err, nats.ErrAuthExpired):
		return "the server refused the credentials (" + err.Error() + "): check the user and password, or the token, of the URL in its secret", false
	case errors.Is(err, nats.ErrPermissionViolation):
		return "the server's permissions refuse this publish: allow the URL's user to publish to the subject", false
	case errors.Is(err, nats.ErrTimeout), errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil:
		return fmt.Sprintf("timed out after %s", timeout), true
	}
	words, retryable := describeError(ctx, attemptCtx, err, timeout)
	return cleanUTF8([]byte(words)), retryable
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}
