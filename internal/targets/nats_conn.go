package targets

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
)

// A NATS job's server is anyone's server, and the NATS client trusts what it announces: a
// message's size sizes its buffer before a byte of it arrives, so "MSG x 1 4611686018427387904"
// would end the replica (a panic in the client's reader goroutine, or memory exhausted),
// every team's jobs with it. natsConn reads what the server sends before the client does
// and ends the connection at the first control line longer than maxNATSLine or message
// larger than maxBodyBytes (an HTTP answer's bound too). It must see the protocol, not TLS
// records, so the dialer makes the TLS session itself, below natsConn, when the client
// asks for one (SkipTLSHandshake).

// maxNATSLine bounds a control line (an INFO with many peers is the longest a server
// sends); the client's own bound is 4 KiB for the lines it parses first.
const maxNATSLine = 64 << 10

// ErrNATSProtocol is a server that broke the NATS protocol or its bounds.
var ErrNATSProtocol = errors.New("the server broke the NATS protocol")

type natsConn struct {
	net.Conn // the TCP connection, or the TLS session over it once made
	line     []byte
	payload  int64 // bytes of a message (and its CRLF) still to come

	mu  sync.Mutex // err is read by the attempt while the client's reader may write it
	err error
}

// failed is why the connection was ended, or nil.
func (c *natsConn) failed() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

func (c *natsConn) fail(err error) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err == nil {
		c.err = err
		c.Conn.Close()
	}
	return c.err
}

func (c *natsConn) Read(p []byte) (int, error) {
	if err := c.failed(); err != nil {
		return 0, err
	}
	n, err := c.Conn.Read(p)
	if n > 0 {
		if err := c.scan(p[:n]); err != nil {
			return 0, c.fail(err)
		}
	}
	return n, err
}

// scan follows the server's stream: control lines, and the payloads they announce.
func (c *natsConn) scan(b []byte) error {
	for len(b) > 0 {
		if c.payload > 0 {
			skip := min(c.payload, int64(len(b)))
			c.payload -= skip
			b = b[skip:]
			continue
		}
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			c.line = append(c.line, b...)
			b = nil
		} else {
			c.line = append(c.line, b[:i]...)
			b = b[i+1:]
		}
		if len(c.line) > maxNATSLine {
			return fmt.Errorf("%w: a control line longer than %d bytes", ErrNATSProtocol, maxNATSLine)
		}
		if i < 0 {
			break
		}
		size, err := announced(c.line)
		if err != nil {
			return err
		}
		c.payload, c.line = size, c.line[:0]
	}
	return nil
}

// announced is how many bytes follow a control line: a message's payload and its CRLF.
func announced(line []byte) (int64, error) {
	f := bytes.Fields(line)
	if len(f) == 0 {
		return 0, nil
	}
	op := string(bytes.ToUpper(f[0]))
	if op != "MSG" && op != "HMSG" {
		return 0, nil
	}
	// MSG subject sid [reply] size; HMSG subject sid [reply] header-size total-size.
	size, err := strconv.ParseInt(string(f[len(f)-1]), 10, 64)
	switch {
	case err != nil || size < 0 || len(f) < 4:
		return 0, fmt.Errorf("%w: a malformed %s line", ErrNATSProtocol, op)
	case size > maxBodyBytes:
		return 0, fmt.Errorf("%w: it announced a message of %d bytes; at most %d are read", ErrNATSProtocol, size, maxBodyBytes)
	}
	return size + 2, nil
}

// SkipTLSHandshake makes the TLS session of the last connection, below its natsConn, when
// the client asks for one (a tls:// URL, or a server that requires it); it returns true,
// which tells the client to leave the connection as it is. A failed handshake fails the
// connection's next read or write.
func (d *natsDialer) SkipTLSHandshake() bool {
	d.mu.Lock()
	c := d.conn
	d.mu.Unlock()
	if c == nil {
		return true
	}
	host, _, _ := net.SplitHostPort(d.addr)
	tc := tls.Client(c.Conn, &tls.Config{ServerName: host, RootCAs: d.roots, MinVersion: tls.VersionTLS12})
	ctx, cancel := context.WithTimeout(d.ctx, tlsHandshakeTimeout)
	defer cancel()
	if err := tc.HandshakeContext(ctx); err != nil {
		c.fail(fmt.Errorf("TLS handshake: %w", err))
		return true
	}
	c.Conn = tc
	return true
}

func (c *natsConn) Write(p []byte) (int, error) {
	if err := c.failed(); err != nil {
		return 0, err
	}
	return c.Conn.Write(p)
}
