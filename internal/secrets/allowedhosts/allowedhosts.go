// Package allowedhosts reads and matches the hosts a stored secret may be sent to (its
// allowed_hosts): each entry is "host" or "host:port", lower-case; a bare host matches any
// port. The API reads entries with Parse, the definition check and the HTTP runner match a
// job's URL with Match, and the caller matches again the host and port it connects to.
package allowedhosts

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"unicode"
)

// Parse reads one allowed_hosts entry and returns its normal form: lower-case, without a
// trailing dot, an IP address in its canonical form (an IPv6 one in brackets when a port
// follows). The error says what to write instead.
func Parse(entry string) (string, error) {
	switch {
	case entry == "":
		return "", errors.New("empty: write a host such as api.example.com, or host:port such as api.example.com:8443")
	case strings.Contains(entry, "://"):
		return "", errors.New("a host, not a URL: leave out the scheme (write api.example.com, not https://api.example.com)")
	case strings.Contains(entry, "/"):
		return "", errors.New("a host, not a URL: leave out the path")
	case strings.Contains(entry, "*"):
		return "", errors.New("no wildcard: list every host the secret may be sent to")
	case strings.Contains(entry, "@"):
		return "", errors.New("a host without user@")
	case strings.IndexFunc(entry, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }) >= 0:
		return "", errors.New("holds a space or a control character")
	case strings.IndexFunc(entry, func(r rune) bool { return r > unicode.MaxASCII }) >= 0:
		return "", errors.New("write an internationalised name in its ASCII form (xn--...)")
	}
	if a, err := netip.ParseAddr(entry); err == nil { // a bare address, IPv6 ones included
		return a.Unmap().WithZone("").String(), nil
	}
	host, port, err := net.SplitHostPort(entry)
	if err != nil {
		host, port = entry, ""
	} else if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 || port != strconv.Itoa(n) {
		return "", fmt.Errorf("port %q is not a port number (1 to 65535)", port)
	}
	h, ok := normalHost(host)
	if !ok {
		return "", fmt.Errorf("%q is neither a host name nor an IP address", host)
	}
	if port == "" {
		return h, nil
	}
	return net.JoinHostPort(h, port), nil
}

// Match reports whether host and port (as a URL or a dial names them) are one of allowed's
// entries, each in Parse's normal form.
func Match(allowed []string, host, port string) bool {
	h, ok := normalHost(strings.Trim(host, "[]"))
	if !ok {
		return false
	}
	for _, e := range allowed {
		eh, ep, err := net.SplitHostPort(e)
		if err != nil { // a bare host: any port
			eh, ep = e, ""
		}
		if eh == h && (ep == "" || ep == port) {
			return true
		}
	}
	return false
}

// FromURL returns the host and port a URL's call connects to: the port written, or the
// scheme's (80, 443, NATS's 4222).
func FromURL(raw string) (host, port string, err error) {
	u, err := url.Parse(raw)
	if err != nil {
		return "", "", err
	}
	host, port = u.Hostname(), u.Port()
	if port == "" {
		switch strings.ToLower(u.Scheme) {
		case "http":
			port = "80"
		case "https":
			port = "443"
		case "nats", "tls": // a NATS server's (internal/targets.NATSPortDefault)
			port = "4222"
		}
	}
	return host, port, nil
}

// Describe writes the hosts of allowed for a message: "a.example.com, b.example.com:8443".
func Describe(allowed []string) string { return strings.Join(allowed, ", ") }

// normalHost is a host name lower-case without its trailing dot, or an address in its
// canonical form; ok is false for anything else.
func normalHost(h string) (string, bool) {
	if a, err := netip.ParseAddr(h); err == nil {
		return a.Unmap().WithZone("").String(), true
	}
	h = strings.TrimSuffix(strings.ToLower(h), ".")
	if h == "" || len(h) > 253 {
		return "", false
	}
	for label := range strings.SplitSeq(h, ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return "", false
		}
		for _, c := range label {
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
				return "", false
			}
		}
	}
	return h, true
}
