package oidc_test

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/stretchr/testify/require"

	"github.com/schedulerhq/scheduler/internal/config"
	"github.com/schedulerhq/scheduler/internal/oidc"
)

// testIssuer is a local OIDC issuer: a discovery document at /.well-known/openid-configuration
// and a key set at /keys, holding the public halves of the keys the test adds.
type testIssuer struct {
	srv *httptest.Server

	mu        sync.Mutex
	keys      []jose.JSONWebKey
	docIssuer string        // the issuer the discovery document names; srv.URL unless changed
	gate      chan struct{} // when set, the discovery document is answered once it is closed

	down          atomic.Bool // every request is answered 503
	keysDown      atomic.Bool // the key set is answered 500
	discoveryHits atomic.Int32
	keysHits      atomic.Int32
}

func newIssuer(t *testing.T, keys ...signingKey) *testIssuer {
	t.Helper()
	iss := &testIssuer{}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /.well-known/openid-configuration", func(w http.ResponseWriter, r *http.Request) {
		iss.discoveryHits.Add(1)
		iss.mu.Lock()
		gate := iss.gate
		iss.mu.Unlock()
		if gate != nil {
			select {
			case <-gate:
			case <-r.Context().Done():
				return
			}
		}
		if iss.down.Load() {
			http.Error(w, "down for maintenance", http.StatusServiceUnavailable)
			return
		}
		iss.mu.Lock()
		doc := map[string]any{
			"issuer":                                iss.docIssuer,
			"jwks_uri":                              iss.srv.URL + "/keys",
			"id_token_signing_alg_values_supported": []string{"RS256", "ES256"},
		}
		iss.mu.Unlock()
		writeJSON(w, doc)
	})
	mux.HandleFunc("GET /keys", func(w http.ResponseWriter, r *http.Request) {
		iss.keysHits.Add(1)
		if iss.down.Load() || iss.keysDown.Load() {
			http.Error(w, "<html>a long error page</html>", http.StatusInternalServerError)
			return
		}
		iss.mu.Lock()
		set := jose.JSONWebKeySet{Keys: append([]jose.JSONWebKey(nil), iss.keys...)}
		iss.mu.Unlock()
		writeJSON(w, set)
	})
	iss.srv = httptest.NewServer(mux)
	t.Cleanup(iss.srv.Close)
	iss.docIssuer = iss.srv.URL
	for _, k := range keys {
		iss.publish(k)
	}
	return iss
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

func (iss *testIssuer) URL() string { return iss.srv.URL }

// holdDiscovery makes the discovery document wait until release is called (at the latest
// when the test ends).
func (iss *testIssuer) holdDiscovery() (release func()) {
	gate := make(chan struct{})
	iss.mu.Lock()
	iss.gate = gate
	iss.mu.Unlock()
	var once sync.Once
	return func() { once.Do(func() { close(gate) }) }
}

// publish adds k's public key to the key set.
func (iss *testIssuer) publish(k signingKey) {
	iss.mu.Lock()
	defer iss.mu.Unlock()
	iss.keys = append(iss.keys, k.public())
}

// signingKey is a private key with the key id and algorithm its tokens name.
type signingKey struct {
	kid     string
	alg     jose.SignatureAlgorithm
	private any // *rsa.PrivateKey or *ecdsa.PrivateKey
}

// RSA keys are slow to make under the race detector, so the few the tests use are made once.
var (
	rsaKeysMu sync.Mutex
	rsaKeys   []*rsa.PrivateKey
)

// rsaKey returns the n-th RSA key, the same one on every call.
func rsaKey(t *testing.T, n int, kid string) signingKey {
	t.Helper()
	rsaKeysMu.Lock()
	defer rsaKeysMu.Unlock()
	for len(rsaKeys) <= n {
		k, err := rsa.GenerateKey(rand.Reader, 2048)
		require.NoError(t, err)
		rsaKeys = append(rsaKeys, k)
	}
	return signingKey{kid: kid, alg: jose.RS256, private: rsaKeys[n]}
}

func ecKey(t *testing.T, kid string) signingKey {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	return signingKey{kid: kid, alg: jose.ES256, private: k}
}

func (k signingKey) public() jose.JSONWebKey {
	var pub any
	switch p := k.private.(type) {
	case *rsa.PrivateKey:
		pub = &p.PublicKey
	case *ecdsa.PrivateKey:
		pub = &p.PublicKey
	}
	return jose.JSONWebKey{Key: pub, KeyID: k.kid, Algorithm: string(k.alg), Use: "sig"}
}

// claims are a token's claims; good returns valid ones for an issuer.
type claims map[string]any

func good(issuer, subject string) claims {
	now := time.Now()
	return claims{
		"iss": issuer,
		"sub": subject,
		"aud": []string{"scheduler", "other"},
		"iat": now.Unix(),
		"nbf": now.Add(-time.Minute).Unix(),
		"exp": now.Add(time.Hour).Unix(),
	}
}

// with returns a copy of c with the given claims set, or removed when nil.
func (c claims) with(kv ...any) claims {
	out := claims{}
	for k, v := range c {
		out[k] = v
	}
	for i := 0; i < len(kv); i += 2 {
		if kv[i+1] == nil {
			delete(out, kv[i].(string))
		} else {
			out[kv[i].(string)] = kv[i+1]
		}
	}
	return out
}

// sign makes a compact JWS of c, signed by k with go-jose.
func sign(t *testing.T, k signingKey, c claims) string {
	t.Helper()
	return signWith(t, jose.SigningKey{Algorithm: k.alg, Key: jose.JSONWebKey{Key: k.private, KeyID: k.kid}}, c)
}

func signWith(t *testing.T, key jose.SigningKey, c claims) string {
	t.Helper()
	signer, err := jose.NewSigner(key, (&jose.SignerOptions{}).WithType("JWT"))
	require.NoError(t, err)
	payload, err := json.Marshal(c)
	require.NoError(t, err)
	jws, err := signer.Sign(payload)
	require.NoError(t, err)
	token, err := jws.CompactSerialize()
	require.NoError(t, err)
	return token
}

// unsigned hand-crafts a token with "alg": "none" and an empty signature.
func unsigned(t *testing.T, kid string, c claims) string {
	t.Helper()
	h, err := json.Marshal(map[string]string{"alg": "none", "typ": "JWT", "kid": kid})
	require.NoError(t, err)
	p, err := json.Marshal(c)
	require.NoError(t, err)
	return base64.RawURLEncoding.EncodeToString(h) + "." + base64.RawURLEncoding.EncodeToString(p) + "."
}

// bindings used by most tests.
var bindings = []config.OIDCBinding{
	{Subject: "system:serviceaccount:billing:*", Namespace: "billing", Role: "editor"},
	{Subject: "system:serviceaccount:*:reporter", Namespace: "*", Role: "viewer"},
	{Subject: "system:serviceaccount:ops:admin", Namespace: "*", Role: "admin"},
	{Subject: "system:serviceaccount:billing:reporter", Namespace: "billing", Role: "editor"}, // adds nothing new
}

// lockedBuffer collects the verifier's log, which its goroutines write.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// newVerifier returns a verifier of iss with the test bindings, and its log.
func newVerifier(t *testing.T, cfg config.OIDC) (*oidc.Verifier, *lockedBuffer) {
	t.Helper()
	if cfg.Audience == "" {
		cfg.Audience = "scheduler"
	}
	if cfg.Bindings == nil {
		cfg.Bindings = bindings
	}
	log := &lockedBuffer{}
	client := &http.Client{Timeout: 10 * time.Second}
	v := oidc.New(cfg, client, slog.New(slog.NewTextHandler(log, &slog.HandlerOptions{Level: slog.LevelDebug})))
	require.NotNil(t, v)
	return v, log
}

// verify runs Verify under a deadline, so that a hang fails the test instead of stalling it.
func verify(t *testing.T, v *oidc.Verifier, token string) (oidc.Identity, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	return v.Verify(ctx, token)
}
