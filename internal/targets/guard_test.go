package targets

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func mustGuard(t *testing.T, allow ...string) *Guard {
	t.Helper()
	g, err := NewGuard(allow)
	require.NoError(t, err)
	return g
}

func TestNewGuardNamesEveryBadEntryAtOnce(t *testing.T) {
	_, err := NewGuard([]string{"10.0.0.0/33", "receiver.internal", " ", "bad host!", "::1/128", "*.internal", "127.0.0.1"})
	require.Error(t, err)
	for _, bad := range []string{`"10.0.0.0/33"`, `"bad host!"`, `"*.internal"`} {
		assert.Contains(t, err.Error(), bad)
	}
	assert.NotContains(t, err.Error(), "receiver.internal\"")
	assert.Contains(t, err.Error(), "SCHEDULER_HTTP_ALLOW")
}

func TestCheckURL(t *testing.T) {
	g := mustGuard(t)
	for raw, want := range map[string]string{
		"ftp://example.com/file":                 `url scheme "ftp" is not supported: use http:// or https://`,
		"https://user:pass@example.com/":         "url must not contain user:password@",
		"http:///path":                           "url has no host",
		"https://":                               "url has no host",
		"http://10.0.0.1/":                       "url host 10.0.0.1 is a private address; an operator can allow it with SCHEDULER_HTTP_ALLOW",
		"http://127.0.0.1:8080/":                 "url host 127.0.0.1 is a loopback address",
		"http://[::1]/":                          "url host ::1 is a loopback address",
		"http://[::ffff:127.0.0.1]/":             "url host ::ffff:127.0.0.1 is a loopback address",
		"http://localhost:8080/":                 "url host localhost is a loopback name",
		"http://api.LOCALHOST./":                 "url host api.localhost is a loopback name",
		"http://169.254.169.254/latest/":         "url host 169.254.169.254 is a cloud metadata address, which is never allowed",
		"http://100.64.1.1/":                     "url host 100.64.1.1 is a shared (CGNAT) address",
		"http://0.0.0.0/":                        "url host 0.0.0.0 is an unspecified address",
		"http://2130706433/":                     "is neither a host name nor an IP address",
		"http://127.1/":                          "is neither a host name nor an IP address",
		"http://0x7f.0x1/":                       "is neither a host name nor an IP address",
		"http://exa mple.com/":                   "does not parse",
		"billing.internal:8080/reports":          "the url needs a scheme, e.g. https://billing.internal:8080/reports",
		"billing.internal/reports":               "the url needs a scheme, e.g. https://billing.internal/reports",
		"http://under_score-ok.example.com/%zz":  "does not parse",
		"http://[fe80::1%25eth0]:8080/something": "url host fe80::1%eth0 is a link-local address",
	} {
		err := g.CheckURL(raw)
		if assert.Error(t, err, raw) {
			assert.Contains(t, err.Error(), want, raw)
		}
	}
	for _, raw := range []string{
		"https://example.com", "http://example.com:8080/x?y=1", "HTTPS://Example.COM./", "https://example.cafe/",
		"https://8.8.8.8/", "https://[2606:4700:4700::1111]/", "https://under_score-ok.example.com/",
	} {
		assert.NoError(t, g.CheckURL(raw), raw)
	}

	allowing := mustGuard(t, "10.0.0.0/8", "LocalHost", "::1")
	assert.NoError(t, allowing.CheckURL("http://10.0.0.1/"))
	assert.NoError(t, allowing.CheckURL("http://localhost:8080/"))
	assert.NoError(t, allowing.CheckURL("http://[::1]:8080/"))
	assert.Error(t, allowing.CheckURL("http://api.localhost/"), "an exact name, not its subdomains")
	assert.Error(t, allowing.CheckURL("http://127.0.0.1/"))

	// localhost names stay refused where the loopback address is allowed, and the refusal
	// says which address to write instead.
	loopback := mustGuard(t, "127.0.0.1/32")
	assert.NoError(t, loopback.CheckURL("http://127.0.0.1:8080/hook"))
	err := loopback.CheckURL("http://localhost:8080/hook?x=1")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "localhost names are refused even where SCHEDULER_HTTP_ALLOW allows 127.0.0.1/32; use the address it names: http://127.0.0.1:8080/hook?x=1")
}

func TestDefaultGuardRefusesNonPublicAddresses(t *testing.T) {
	g := mustGuard(t)
	for addr, reason := range map[string]string{
		"127.0.0.1": "a loopback address", "10.0.0.1": "a private address", "172.16.0.1": "a private address",
		"192.168.1.1": "a private address", "169.254.1.1": "a link-local address", "0.0.0.0": "an unspecified address",
		"224.0.0.1": "a multicast address", "100.64.0.1": "a shared (CGNAT) address", "192.0.2.1": "a reserved, non-public address",
		"255.255.255.255": "a reserved, non-public address", "::1": "a loopback address", "fe80::1": "a link-local address",
		"fc00::1": "a private address", "::": "an unspecified address", "ff02::1": "a multicast address",
		"::ffff:127.0.0.1": "a loopback address", "::ffff:10.0.0.1": "a private address", "2001:db8::1": "a reserved, non-public address",
		"64:ff9b::7f00:1": "a reserved, non-public address", "169.254.169.254": "a cloud metadata address",
		"fd00:ec2::254": "a cloud metadata address", "100.100.100.200": "a cloud metadata address",
	} {
		err := g.checkAddr("", netip.MustParseAddr(addr), false)
		var refused *RefusedError
		if assert.ErrorAs(t, err, &refused, addr) {
			assert.Equal(t, reason, refused.Reason, addr)
		}
	}
	for _, addr := range []string{"8.8.8.8", "1.1.1.1", "2606:4700:4700::1111", "::ffff:8.8.8.8"} {
		assert.NoError(t, g.checkAddr("", netip.MustParseAddr(addr), false), addr)
	}
	assert.EqualError(t, g.checkAddr("", netip.MustParseAddr("::ffff:127.0.0.1"), false),
		"refused: 127.0.0.1 is a loopback address", "a mapped address is named as the IPv4 address it is")
}

func TestMetadataAddressesRefusedWhateverTheAllowList(t *testing.T) {
	everything := mustGuard(t, "0.0.0.0/0", "::/0", "64:ff9b::/96")
	for _, addr := range []string{"169.254.169.254", "fd00:ec2::254", "fd20:ce::254", "100.100.100.200", "::ffff:169.254.169.254", "64:ff9b::a9fe:a9fe"} {
		assert.Error(t, everything.checkAddr("", netip.MustParseAddr(addr), false), addr)
		assert.Error(t, everything.checkAddr("metadata.internal", netip.MustParseAddr(addr), true), "an allowed name: %s", addr)
	}
	assert.NoError(t, everything.checkAddr("", netip.MustParseAddr("10.0.0.1"), false))
	assert.NoError(t, everything.checkAddr("", netip.MustParseAddr("::1"), false))

	linkLocal := mustGuard(t, "169.254.0.0/16")
	assert.NoError(t, linkLocal.checkAddr("", netip.MustParseAddr("169.254.1.1"), false))
	assert.EqualError(t, linkLocal.checkAddr("", netip.MustParseAddr("169.254.169.254"), false),
		"refused: 169.254.169.254 is a cloud metadata address")
	assert.Error(t, mustGuard(t, "0.0.0.0/0").CheckURL("http://169.254.169.254/"))
}

// The container-credentials and instance-services addresses hand out credentials as the
// metadata address does: 169.254.170.2 (ECS task roles), 169.254.170.23 and fd00:ec2::23
// (EKS Pod Identity), and 168.63.129.16 (Azure's WireServer, a public address, which the
// guard let through even with no allow list). They are refused unless an operator names
// the address (or a part of its range no wider than the range): 169.254.0.0/16 or
// 0.0.0.0/0 does not name them (issue 28, 5).
func TestCredentialAddressesRefusedUnlessNamed(t *testing.T) {
	credentials := []string{"169.254.170.2", "169.254.170.23", "169.254.169.1", "169.254.169.253", "fd00:ec2::23",
		"fd00:ec2::123", "168.63.129.16", "::ffff:168.63.129.16", "64:ff9b::a83f:8110", "64:ff9b::a9fe:aa02"}
	for _, g := range map[string]*Guard{
		"no allow list": mustGuard(t),
		"everything":    mustGuard(t, "0.0.0.0/0", "::/0", "64:ff9b::/96"),
		"link-local":    mustGuard(t, "169.254.0.0/16", "fd00::/8", "168.63.0.0/16"),
	} {
		for _, addr := range credentials {
			err := g.checkAddr("", netip.MustParseAddr(addr), false)
			var refused *RefusedError
			if assert.ErrorAs(t, err, &refused, addr) {
				assert.Contains(t, refused.Reason, "only when an operator names it in SCHEDULER_HTTP_ALLOW", addr)
			}
			assert.Error(t, g.checkAddr("creds.internal", netip.MustParseAddr(addr), true), "an allowed name: %s", addr)
		}
	}
	err := mustGuard(t, "0.0.0.0/0").CheckURL("http://168.63.129.16/machine")
	if assert.Error(t, err) {
		assert.Equal(t, "url host 168.63.129.16 is the Azure WireServer address, allowed only when an operator names it in SCHEDULER_HTTP_ALLOW", err.Error())
	}

	named := mustGuard(t, "169.254.170.2", "fd00:ec2::23/128", "168.63.129.16/32", "169.254.169.0/24")
	for _, addr := range []string{"169.254.170.2", "fd00:ec2::23", "168.63.129.16", "169.254.169.1"} {
		assert.NoError(t, named.checkAddr("", netip.MustParseAddr(addr), false), addr)
	}
	assert.Error(t, named.checkAddr("", netip.MustParseAddr("169.254.170.23"), false), "only the address named")
	assert.Error(t, named.checkAddr("", netip.MustParseAddr("169.254.169.254"), false), "the metadata address is never allowed")
	assert.NoError(t, named.CheckURL("http://169.254.170.2/v2/credentials"))
}

// acceptCounter is a TCP listener on loopback that tells, deterministically, whether any
// connection reached it before a marker connection of the test's own.
type acceptCounter struct {
	ln       net.Listener
	accepted chan net.Addr
}

func listen(t *testing.T) *acceptCounter {
	t.Helper()
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	require.NoError(t, err)
	a := &acceptCounter{ln: ln, accepted: make(chan net.Addr, 16)}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			a.accepted <- conn.RemoteAddr()
			conn.Close()
		}
	}()
	return a
}

func (a *acceptCounter) port() string { return strconv.Itoa(a.ln.Addr().(*net.TCPAddr).Port) }

// requireNothingAccepted connects once itself and requires that connection to be the first the
// listener accepted: the kernel queues connections in order, so an earlier one would come first.
func (a *acceptCounter) requireNothingAccepted(t *testing.T) {
	t.Helper()
	marker, err := net.Dial("tcp4", a.ln.Addr().String())
	require.NoError(t, err)
	defer marker.Close()
	select {
	case from := <-a.accepted:
		require.Equal(t, marker.LocalAddr().String(), from.String(), "a refused dial reached the listener")
	case <-time.After(5 * time.Second):
		t.Fatal("the marker connection was not accepted")
	}
}

func TestDialContextRefusesInternalAddressesWithoutConnecting(t *testing.T) {
	ln := listen(t)
	g := mustGuard(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, addr := range []string{
		"127.0.0.1:" + ln.port(), "localhost:" + ln.port(), "LOCALHOST.:" + ln.port(), "[::ffff:127.0.0.1]:" + ln.port(),
		"[::1]:" + ln.port(), "10.0.0.1:80", "169.254.169.254:80", "[fd00:ec2::254]:80", "0.0.0.0:" + ln.port(),
	} {
		start := time.Now()
		conn, err := g.DialContext(ctx, "tcp", addr)
		if conn != nil {
			conn.Close()
		}
		var refused *RefusedError
		assert.ErrorAs(t, err, &refused, addr)
		assert.Less(t, time.Since(start), time.Second, "%s: refused before any connect", addr)
	}
	_, err := g.DialContext(ctx, "udp", "8.8.8.8:53")
	assert.ErrorContains(t, err, "only tcp is allowed")
	ln.requireNothingAccepted(t)

	allowed := mustGuard(t, "127.0.0.1/32")
	conn, err := allowed.DialContext(ctx, "tcp", "127.0.0.1:"+ln.port())
	require.NoError(t, err)
	conn.Close()
}

func TestDialContextChecksEveryResolvedAddress(t *testing.T) {
	ln := listen(t)
	g := mustGuard(t, "receiver.internal", "metadata.internal")
	g.lookup = func(_ context.Context, _, host string) ([]netip.Addr, error) {
		return map[string][]netip.Addr{
			"mixed.example":     {netip.MustParseAddr("8.8.8.8"), netip.MustParseAddr("10.0.0.5")},
			"receiver.internal": {netip.MustParseAddr("127.0.0.1")},
			"metadata.internal": {netip.MustParseAddr("169.254.169.254")},
		}[host], nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()

	_, err := g.DialContext(ctx, "tcp", "mixed.example:443")
	assert.EqualError(t, err, "refused: mixed.example resolves to 10.0.0.5, a private address")
	_, err = g.DialContext(ctx, "tcp", "metadata.internal:80")
	assert.EqualError(t, err, "refused: metadata.internal resolves to 169.254.169.254, a cloud metadata address")

	conn, err := g.DialContext(ctx, "tcp", "Receiver.Internal:"+ln.port())
	require.NoError(t, err, "an allowed name reaches its internal address")
	conn.Close()
}

// The Control hook sees the address the socket is about to connect to, whatever the lookup said:
// it is what stops a second resolution (DNS rebinding) from reaching an internal address.
func TestControlHookChecksTheAddressConnectedTo(t *testing.T) {
	g := mustGuard(t, "10.1.0.0/16")
	control := g.control("rebinding.example", false)
	var refused *RefusedError
	require.ErrorAs(t, control("tcp4", "127.0.0.1:443", nil), &refused)
	assert.Equal(t, "refused: rebinding.example resolves to 127.0.0.1, a loopback address", refused.Error())
	assert.Error(t, control("tcp6", "[::ffff:10.0.0.1]:443", nil))
	assert.NoError(t, control("tcp4", "10.1.2.3:443", nil))
	assert.NoError(t, control("tcp4", "8.8.8.8:443", nil))
	assert.Error(t, g.control("allowed.example", true)("tcp4", "169.254.169.254:80", nil))
	assert.True(t, errors.As(control("tcp4", "0.0.0.0:80", nil), &refused))
}
