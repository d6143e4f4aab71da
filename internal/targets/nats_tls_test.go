package targets

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"math/big"
	"net"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schedulerhq/scheduler/internal/targets/natstest"
)

// selfSigned is a certificate for 127.0.0.1 and the pool that trusts it.
func selfSigned(t *testing.T) (tls.Certificate, *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "nats"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	leaf, err := x509.ParseCertificate(der)
	require.NoError(t, err)
	pool := x509.NewCertPool()
	pool.AddCert(leaf)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}, pool
}

// A server that requires TLS gets it, under the guard's reading of what it sends (the
// session is made below natsConn): a tls:// URL and a nats:// one the server upgrades both
// publish; a certificate nobody trusts fails the attempt, nothing published.
func TestPublishOverTLS(t *testing.T) {
	cert, pool := selfSigned(t)
	srv := natstest.Start(t, func(o *server.Options) {
		o.TLSConfig = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
		o.TLS, o.TLSTimeout = true, 5
	})
	hostPort := srv.Addr().String()
	res := loopbackCaller(t, Config{}).Publish(testCtx(t), natsRequest("tls://"+hostPort, "untrusted"))
	require.Error(t, res.Err)
	assert.Contains(t, res.Attempts[0].Error, "TLS handshake")

	c := loopbackCaller(t, Config{NATSRootCAs: pool})
	srv.ClientOptions = []nats.Option{nats.Secure(&tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12})}
	stream := srv.AddStream(t, "TICKS", "ticks.>")
	for _, u := range []string{"tls://" + hostPort, "nats://" + hostPort} {
		res := c.Publish(testCtx(t), natsRequest(u, u))
		require.NoError(t, res.Err, u)
	}
	assert.Len(t, natstest.Messages(t, stream), 2)
}
