// Package targets calls the HTTP targets of runtime jobs: URLs that users type into a job
// definition, which the scheduler then calls from inside its own network.
//
// That is the threat this package is built around (server-side request forgery): a user who
// may define a job must not thereby reach what only the scheduler can reach — its database,
// the admin ports of neighbouring services on loopback or the private network, or the cloud
// metadata service at 169.254.169.254, which hands out the machine's credentials to anyone who
// asks from inside. So every address is checked twice: once when a definition is written
// (CheckURL, static, to tell the user early) and again on every connection (DialContext),
// after DNS resolution and on the address actually connected to, because a name that resolved
// to a public address yesterday — or a second ago — can resolve to 10.0.0.5 now.
//
// The caller (Caller.Do) adds what a receiver needs to act once per run however often it is
// retried: a stable idempotency key and a Standard Webhooks signature.
package targets

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"strings"
	"syscall"
	"time"

	"code.dny.dev/ssrf"
)

// dialTimeout bounds the TCP connect of one attempt, so that an address that drops SYNs
// fails in seconds rather than after the kernel's minutes of retransmits.
const dialTimeout = 5 * time.Second

// allowHint ends every refusal a user sees, so that they know who can lift it.
const allowHint = "an operator can allow it with SCHEDULER_HTTP_ALLOW"

// metadataAddrs are the cloud instance-metadata endpoints. They hand out the machine's own
// credentials, so no allow list lets them through: an operator who allows 169.254.0.0/16 for
// a link-local service, or 0.0.0.0/0 to turn the guard off, did not mean to give every job
// author the node's cloud role.
var metadataAddrs = []netip.Addr{
	netip.MustParseAddr("169.254.169.254"), // AWS, GCP, Azure, Oracle, DigitalOcean, ...
	netip.MustParseAddr("fd00:ec2::254"),   // AWS over IPv6
	netip.MustParseAddr("fd20:ce::254"),    // GCP over IPv6
	netip.MustParseAddr("100.100.100.200"), // Alibaba Cloud
}

// credentialRanges hand out credentials too, but an operator may need one of their addresses
// (a job that reads its own task's role, say). So they are refused even when a wider allow
// entry (169.254.0.0/16, fd00::/8, 0.0.0.0/0) covers them, and let through only when an
// entry names the address or a part of its range: allowing a network must not give every
// job author the node's or the pod's cloud role. 168.63.129.16 is a public address, which
// the special-purpose list alone lets through.
var credentialRanges = []struct {
	prefix netip.Prefix
	what   string
}{
	{netip.MustParsePrefix("169.254.169.0/24"), "in the cloud metadata range"},
	{netip.MustParsePrefix("169.254.170.0/24"), "a container credentials address (ECS task roles, EKS Pod Identity)"},
	{netip.MustParsePrefix("fd00:ec2::/32"), "an AWS instance services address (metadata, credentials, DNS, time)"},
	{netip.MustParsePrefix("168.63.129.16/32"), "the Azure WireServer address"},
}

// namedHint ends the refusal of a credentials address: a wider allow entry does not do.
const namedHint = "allowed only when an operator names it in SCHEDULER_HTTP_ALLOW"

// cgnat is named only to word the refusal; whether it is refused comes from the ssrf list.
var cgnat = netip.MustParsePrefix("100.64.0.0/10")

// RefusedError says that the guard refused an address, before any connection was made to it.
type RefusedError struct {
	Host   string     // the name that resolved to Addr; "" when the target was an address
	Addr   netip.Addr // the refused address
	Reason string     // what the address is, e.g. "a loopback address"
}

func (e *RefusedError) Error() string {
	if e.Host != "" && e.Host != e.Addr.String() {
		return fmt.Sprintf("refused: %s resolves to %s, %s", e.Host, e.Addr, e.Reason)
	}
	return fmt.Sprintf("refused: %s is %s", e.Addr, e.Reason)
}

// Guard refuses loopback, private, link-local, unspecified, multicast, CGNAT and other
// non-public addresses, and cloud-metadata addresses, unless an operator allowed them.
// It is safe for concurrent use.
type Guard struct {
	allowPrefixes []netip.Prefix
	allowHosts    map[string]bool // lower case, without a trailing dot
	special       *ssrf.Guardian  // the IANA special-purpose ranges; ports and networks are ours to judge

	// A namespace's guard (guard_namespace.go) is narrowed from the operator's: outer is the
	// operator's, which every address must pass too; hint and named say who lifts a
	// refusal; key names its allowance, which its connections are pooled by.
	outer       *Guard
	hint, named string
	key         string

	// lookup resolves a host name; tests replace it to play a DNS server that lies.
	lookup func(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// NewGuard parses the allow list (SCHEDULER_HTTP_ALLOW): each entry is a CIDR ("10.1.0.0/16",
// "127.0.0.1/32", "::1/128"), a single address (taken as /32 or /128), or a host name
// ("receiver.internal", case-insensitive exact match). Blank entries are skipped. It returns an
// error naming every bad entry at once.
func NewGuard(allow []string) (*Guard, error) {
	g := &Guard{
		allowHosts: map[string]bool{},
		special:    ssrf.New(ssrf.WithAnyPort(), ssrf.WithAnyNetwork()),
		lookup:     net.DefaultResolver.LookupNetIP,
		hint:       allowHint,
		named:      namedHint,
	}
	var bad []string
	for _, entry := range allow {
		entry = strings.TrimSpace(entry)
		switch {
		case entry == "":
		case strings.Contains(entry, "/"):
			p, err := netip.ParsePrefix(entry)
			if err != nil {
				bad = append(bad, fmt.Sprintf("%q is not a CIDR", entry))
				continue
			}
			g.allowPrefixes = append(g.allowPrefixes, netip.PrefixFrom(p.Addr().Unmap(), unmappedBits(p)).Masked())
		default:
			if a, err := netip.ParseAddr(entry); err == nil {
				a = a.Unmap().WithZone("")
				g.allowPrefixes = append(g.allowPrefixes, netip.PrefixFrom(a, a.BitLen()))
				continue
			}
			name := normalHost(entry)
			if !validHostName(name) {
				bad = append(bad, fmt.Sprintf("%q is neither a CIDR nor a host name", entry))
				continue
			}
			g.allowHosts[name] = true
		}
	}
	if len(bad) > 0 {
		return nil, fmt.Errorf("SCHEDULER_HTTP_ALLOW: %s; want comma-separated CIDRs or host names such as 10.1.0.0/16,::1/128,receiver.internal",
			strings.Join(bad, ", "))
	}
	return g, nil
}

// CheckURL is the static check made when a definition is written (no DNS lookup): scheme http
// or https only; a host is required; no userinfo (user:pass@); a literal IP host, or the names
// "localhost"/"*.localhost", refused unless allowed. Each error says what to do.
func (g *Guard) CheckURL(raw string) error {
	if !strings.Contains(raw, "://") {
		// Without one, Go's parser reads "host:8080/x" as a scheme or fails on it in its
		// own words (issue 34).
		return fmt.Errorf("the url needs a scheme, e.g. https://%s", strings.TrimLeft(raw, "/"))
	}
	u, err := url.Parse(raw)
	if err != nil {
		return fmt.Errorf("url %q does not parse: %w", raw, err)
	}
	if s := strings.ToLower(u.Scheme); s != "http" && s != "https" {
		return fmt.Errorf("url scheme %q is not supported: use http:// or https://", u.Scheme)
	}
	if u.User != nil {
		// Credentials in the URL end up in logs and run listings; headers are kept secret.
		return errors.New("url must not contain user:password@: put credentials in a header instead")
	}
	return g.checkURLHost(u)
}

// checkURLHost is the static check of a URL's host, whatever its scheme: a host is
// required; a literal IP host, or the names "localhost"/"*.localhost", refused unless
// allowed.
func (g *Guard) checkURLHost(u *url.URL) error {
	host := normalHost(u.Hostname())
	if host == "" {
		return errors.New("url has no host: write it as https://host/path")
	}
	if a, err := netip.ParseAddr(host); err == nil {
		if err := g.checkAddr("", a, false); err != nil {
			var refused *RefusedError
			errors.As(err, &refused)
			return g.urlRefusal(host, refused.Reason)
		}
		return nil
	}
	if g.allowHosts[host] {
		return nil
	}
	if host == "localhost" || strings.HasSuffix(host, ".localhost") {
		return g.loopbackNameRefusal(u, host)
	}
	if !validHostName(host) || numericLabel(host[strings.LastIndexByte(host, '.')+1:]) {
		// "127.1" or "2130706433" are not names: some resolvers read them as addresses.
		return fmt.Errorf("url host %s is neither a host name nor an IP address", host)
	}
	return nil
}

// loopbackNameRefusal refuses a localhost name. An allow list that lets a loopback address
// through does not let the names through (what they resolve to is the resolver's to say), so
// the refusal names the address to write instead.
func (g *Guard) loopbackNameRefusal(u *url.URL, host string) error {
	for _, a := range []netip.Addr{netip.MustParseAddr("127.0.0.1"), netip.IPv6Loopback()} {
		for _, p := range g.allowPrefixes {
			if p.Contains(a) {
				at := *u
				at.User = nil // a NATS URL from a secret may hold a password
				at.Host = a.String()
				if a.Is6() {
					at.Host = "[" + at.Host + "]"
				}
				if port := u.Port(); port != "" {
					at.Host += ":" + port
				}
				return fmt.Errorf("url host %s is refused: localhost names are refused even where SCHEDULER_HTTP_ALLOW allows %s; use the address it names: %s",
					host, p, at.String())
			}
		}
	}
	return fmt.Errorf("url host %s is a loopback name: localhost names are refused; %s, or use an address it allows", host, g.hint)
}

func (g *Guard) urlRefusal(host, reason string) error {
	if reason == metadataReason {
		return fmt.Errorf("url host %s is %s, which is never allowed", host, reason)
	}
	if strings.Contains(reason, "allowed only when") { // a credentials address: its own hint
		return fmt.Errorf("url host %s is %s", host, reason)
	}
	return fmt.Errorf("url host %s is %s; %s", host, reason, g.hint)
}

// DialContext resolves addr, checks every resolved address and dials only checked ones; the
// dialer's Control hook checks again the address actually connected to, so that nothing between
// the lookup and the connect can get around the check. A host name in the allow list lets its
// resolved addresses through, still never the metadata ones. One refused address refuses the
// whole name: a name that mixes public and internal records is not one to call.
func (g *Guard) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	ipNetwork, ok := map[string]string{"tcp": "ip", "tcp4": "ip4", "tcp6": "ip6"}[network]
	if !ok {
		return nil, fmt.Errorf("dial %s %s: only tcp is allowed", network, addr)
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("dial %s: %w", addr, err)
	}
	host = normalHost(host)
	hostAllowed := g.allowHosts[host]

	addrs, err := g.resolve(ctx, ipNetwork, host)
	if err != nil {
		return nil, err // a *net.DNSError, which already names the host
	}
	if _, err := netip.ParseAddr(host); err == nil {
		host = "" // an address needs no "resolves to" in a refusal
	}
	for _, a := range addrs {
		if err := g.checkAddr(host, a, hostAllowed); err != nil {
			return nil, err
		}
	}

	dialer := &net.Dialer{Timeout: dialTimeout, Control: g.control(host, hostAllowed)}
	var lastErr error
	for _, a := range addrs {
		conn, err := dialer.DialContext(ctx, network, net.JoinHostPort(a.Unmap().String(), port))
		if err == nil {
			return conn, nil
		}
		lastErr = err
		if ctx.Err() != nil {
			break
		}
	}
	if lastErr == nil {
		lastErr = fmt.Errorf("dial %s: no address found", addr)
	}
	return nil, lastErr
}

func (g *Guard) resolve(ctx context.Context, network, host string) ([]netip.Addr, error) {
	if a, err := netip.ParseAddr(host); err == nil {
		return []netip.Addr{a}, nil
	}
	return g.lookup(ctx, network, host)
}

// control is the net.Dialer hook, run on the socket's peer address just before connect.
func (g *Guard) control(host string, hostAllowed bool) func(network, address string, _ syscall.RawConn) error {
	return func(_, address string, _ syscall.RawConn) error {
		ap, err := netip.ParseAddrPort(address)
		if err != nil {
			return fmt.Errorf("check address %s: %w", address, err)
		}
		return g.checkAddr(host, ap.Addr(), hostAllowed)
	}
}

const metadataReason = "a cloud metadata address"

// checkAddr says whether a may be connected to; host is the name it came from, for the message.
func (g *Guard) checkAddr(host string, a netip.Addr, hostAllowed bool) error {
	// ::ffff:127.0.0.1 is 127.0.0.1 on the wire, and a zone does not change where it leads.
	a = a.Unmap().WithZone("")
	if err := g.checkOwn(host, a, hostAllowed); err != nil {
		return err
	}
	if g.outer == nil {
		return nil
	}
	// The operator's list stays the bound of every namespace's, at every connection: a
	// credentials address passes only where the operator named it too.
	return g.outer.checkAddr(host, a, g.outer.allowHosts[normalHost(host)])
}

// checkOwn is checkAddr against g's own allow list.
func (g *Guard) checkOwn(host string, a netip.Addr, hostAllowed bool) error {
	if isMetadata(a) {
		return &RefusedError{Host: host, Addr: a, Reason: metadataReason}
	}
	if what, ok := g.unnamedCredentials(a); ok {
		return &RefusedError{Host: host, Addr: a, Reason: what + ", " + g.named}
	}
	if hostAllowed {
		return nil
	}
	for _, p := range g.allowPrefixes {
		if p.Contains(a) {
			return nil
		}
	}
	if g.special.SafeAddr(a) != nil {
		return &RefusedError{Host: host, Addr: a, Reason: describe(a)}
	}
	return nil
}

// unnamedCredentials says whether a lies in a credentials range that no allow entry names
// (an entry no wider than the range that holds a), and what the range is. A host name in
// the allow list names no address: it may resolve anywhere.
func (g *Guard) unnamedCredentials(a netip.Addr) (string, bool) {
	a = unNAT64(a)
	for _, c := range credentialRanges {
		if !c.prefix.Contains(a) {
			continue
		}
		for _, p := range g.allowPrefixes {
			if p.Contains(a) && p.Bits() >= c.prefix.Bits() {
				return "", false
			}
		}
		return c.what, true
	}
	return "", false
}

// unNAT64 is the IPv4 address a NAT64 address leads to (a itself otherwise): an operator who
// allows NAT64 must not thereby reach 64:ff9b::a9fe:a9fe.
func unNAT64(a netip.Addr) netip.Addr {
	if ssrf.IPv6NAT64Prefix.Contains(a) {
		b := a.As16()
		return netip.AddrFrom4([4]byte(b[12:]))
	}
	return a
}

func isMetadata(a netip.Addr) bool {
	a = unNAT64(a)
	for _, m := range metadataAddrs {
		if a == m {
			return true
		}
	}
	return false
}

// describe words what kind of non-public address a is, for a user who typed it.
func describe(a netip.Addr) string {
	switch {
	case a.IsLoopback():
		return "a loopback address"
	case a.IsPrivate():
		return "a private address"
	case a.IsLinkLocalUnicast():
		return "a link-local address"
	case a.IsUnspecified():
		return "an unspecified address"
	case a.IsMulticast():
		return "a multicast address"
	case cgnat.Contains(a):
		return "a shared (CGNAT) address"
	}
	return "a reserved, non-public address"
}

// unmappedBits keeps a prefix written as ::ffff:10.0.0.0/104 meaning 10.0.0.0/8, since
// addresses are unmapped before they are checked.
func unmappedBits(p netip.Prefix) int {
	if p.Addr().Is4In6() {
		return max(p.Bits()-96, 0)
	}
	return p.Bits()
}
