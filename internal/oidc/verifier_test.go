package oidc_test

import (
	"context"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schedulerhq/scheduler/internal/config"
	"github.com/schedulerhq/scheduler/internal/oidc"
)

func TestNewContactsNoOne(t *testing.T) {
	iss := newIssuer(t, rsaKey(t, 0, "rsa-0"))
	newVerifier(t, config.OIDC{Issuer: iss.URL()})
	newVerifier(t, config.OIDC{Issuer: iss.URL(), JWKSURL: iss.URL() + "/keys"})
	assert.Zero(t, iss.discoveryHits.Load())
	assert.Zero(t, iss.keysHits.Load())

	assert.Nil(t, oidc.New(config.OIDC{}, nil, nil), "no issuer: OIDC off")
	_, err := (*oidc.Verifier)(nil).Verify(t.Context(), "a.b.c")
	assert.ErrorIs(t, err, oidc.ErrUnauthorized)
	assert.ErrorContains(t, err, "not configured")
}

func TestGoodTokens(t *testing.T) {
	rsa0, ec := rsaKey(t, 0, "rsa-0"), ecKey(t, "ec-0")
	iss := newIssuer(t, rsa0, ec)
	v, _ := newVerifier(t, config.OIDC{Issuer: iss.URL()})

	tests := []struct {
		subject string
		want    []oidc.Grant
	}{
		{"system:serviceaccount:billing:runner", []oidc.Grant{{Namespace: "billing", Role: "editor"}}},
		// Two globs match: both grants, in binding order, and the fourth binding's
		// repetition of the first grant only once.
		{"system:serviceaccount:billing:reporter", []oidc.Grant{{Namespace: "billing", Role: "editor"}, {Namespace: "*", Role: "viewer"}}},
		{"system:serviceaccount:ops:reporter", []oidc.Grant{{Namespace: "*", Role: "viewer"}}},
		{"system:serviceaccount:ops:admin", []oidc.Grant{{Namespace: "*", Role: "admin"}}},
	}
	for _, key := range []signingKey{rsa0, ec} {
		for _, tt := range tests {
			t.Run(string(key.alg)+" "+tt.subject, func(t *testing.T) {
				id, err := verify(t, v, sign(t, key, good(iss.URL(), tt.subject)))
				require.NoError(t, err)
				assert.Equal(t, oidc.Identity{Subject: tt.subject, Grants: tt.want}, id)
			})
		}
	}
	assert.Equal(t, int32(1), iss.discoveryHits.Load(), "discovered once")
	assert.Equal(t, int32(1), iss.keysHits.Load(), "keys fetched once and cached")
}

func TestSubjectMatchingNoBinding(t *testing.T) {
	key := rsaKey(t, 0, "rsa-0")
	iss := newIssuer(t, key)
	v, _ := newVerifier(t, config.OIDC{Issuer: iss.URL()})
	for _, subject := range []string{
		"system:serviceaccount:billing-eu:runner", // billing:* is not billing-eu:*
		"system:serviceaccount:ops:admin2",        // a glob without * matches the whole subject only
		"x-system:serviceaccount:billing:runner",
	} {
		_, err := verify(t, v, sign(t, key, good(iss.URL(), subject)))
		assert.ErrorIs(t, err, oidc.ErrUnauthorized)
		assert.NotErrorIs(t, err, oidc.ErrUnavailable)
		assert.EqualError(t, err, `OIDC token refused: subject "`+subject+`" matches no binding in SCHEDULER_OIDC_BINDINGS`)
	}
}

// rsaPublicBytes are the forms in which an RSA public key is commonly published, which an
// HS256 token would use as its HMAC secret in the algorithm-confusion attack.
func rsaPublicBytes(t *testing.T, k signingKey) (pemForm, derForm []byte) {
	t.Helper()
	der, err := x509.MarshalPKIXPublicKey(&k.private.(*rsa.PrivateKey).PublicKey)
	require.NoError(t, err)
	return pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}), der
}

func TestRefusedTokens(t *testing.T) {
	key := rsaKey(t, 0, "rsa-0")
	stranger := rsaKey(t, 1, "rsa-0") // a key the issuer does not publish, under a kid it does
	iss := newIssuer(t, key, ecKey(t, "ec-0"))
	v, log := newVerifier(t, config.OIDC{Issuer: iss.URL()})
	const subject = "system:serviceaccount:billing:runner"
	ok := good(iss.URL(), subject)
	now := time.Now()
	pemKey, derKey := rsaPublicBytes(t, key)
	altered := func() string {
		parts := strings.Split(sign(t, key, ok), ".")
		parts[1] = strings.Split(sign(t, key, ok.with("sub", "system:serviceaccount:ops:admin")), ".")[1]
		return strings.Join(parts, ".")
	}()

	tests := []struct {
		name, token, want string
	}{
		{"expired", sign(t, key, ok.with("exp", now.Add(-time.Minute).Unix())), "it expired at "},
		{"not yet valid", sign(t, key, ok.with("nbf", now.Add(time.Hour).Unix())), "before the nbf (not before) time"},
		{"issued in the future", sign(t, key, ok.with("iat", now.Add(time.Hour).Unix())), "it was issued in the future (iat "},
		{"no expiry", sign(t, key, ok.with("exp", nil)), "it has no expiry (exp)"},
		{"wrong issuer", sign(t, key, ok.with("iss", "https://other.example")), `issued by a different provider, expected "` + iss.URL() + `" got "https://other.example"`},
		{"wrong audience", sign(t, key, ok.with("aud", "other")), `expected audience "scheduler" got ["other"]`},
		{"no subject", sign(t, key, ok.with("sub", nil)), "it has no subject (sub)"},
		{"signed by another key under a known kid", sign(t, stranger, ok), `its signature does not verify with any of the issuer's keys (the token names key id "rsa-0")`},
		{"altered claims", altered, `its signature does not verify with any of the issuer's keys (the token names key id "rsa-0")`},
		{"alg none", unsigned(t, "rsa-0", ok), `it is signed with algorithm "none"; only RS256 and ES256 are accepted`},
		{"HS256 keyed with the RSA public key as PEM", signWith(t, jose.SigningKey{Algorithm: jose.HS256, Key: pemKey}, ok), `it is signed with algorithm "HS256"`},
		{"HS256 keyed with the RSA public key as DER", signWith(t, jose.SigningKey{Algorithm: jose.HS256, Key: derKey}, ok), `it is signed with algorithm "HS256"`},
		{"RS384", signWith(t, jose.SigningKey{Algorithm: jose.RS384, Key: jose.JSONWebKey{Key: key.private, KeyID: key.kid}}, ok), `algorithm "RS384"; only RS256 and ES256`},
		{"not a JWT", "opaque-api-token", "it is not a signed JWT: a JWT has three parts separated by dots"},
		{"too long", strings.Repeat("a", 40<<10), "the token is 40960 bytes long, more than the 32768 accepted"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := verify(t, v, tt.token)
			require.Error(t, err)
			assert.ErrorIs(t, err, oidc.ErrUnauthorized)
			assert.NotErrorIs(t, err, oidc.ErrUnavailable)
			assert.True(t, strings.HasPrefix(err.Error(), "OIDC token refused: "), err.Error())
			assert.Contains(t, err.Error(), tt.want)
			assertHoldsNoToken(t, err.Error(), tt.token)
		})
	}
	for _, tt := range tests {
		assertHoldsNoToken(t, log.String(), tt.token)
	}
	// Each token the cached keys did not verify made go-oidc ask for the keys again; the
	// set fetched moments before was served instead of calling the issuer.
	assert.Equal(t, int32(1), iss.keysHits.Load())
}

// assertHoldsNoToken checks that text quotes no part of token longer than a key id.
func assertHoldsNoToken(t *testing.T, text, token string) {
	t.Helper()
	for _, part := range strings.Split(token, ".") {
		if len(part) > 20 {
			assert.NotContains(t, text, part)
		}
	}
}

// An unknown key id makes the verifier fetch the keys again, once, before refusing.
func TestUnknownKeyRefetchesOnce(t *testing.T) {
	key := rsaKey(t, 0, "rsa-0")
	iss := newIssuer(t, key)
	v, _ := newVerifier(t, config.OIDC{Issuer: iss.URL()})
	_, err := verify(t, v, sign(t, key, good(iss.URL(), "system:serviceaccount:billing:a")))
	require.NoError(t, err)
	require.Equal(t, int32(1), iss.keysHits.Load())

	oidc.SetKeyRefreshInterval(v, 0) // as if the refresh interval had passed
	unknown := sign(t, rsaKey(t, 1, "rsa-unknown"), good(iss.URL(), "system:serviceaccount:billing:a"))
	untilKeysFetched(t, iss, 2, func() {
		_, err = verify(t, v, unknown)
		assert.ErrorIs(t, err, oidc.ErrUnauthorized)
		assert.EqualError(t, err, `OIDC token refused: its signature does not verify with any of the issuer's keys (the token names key id "rsa-unknown"): another issuer or key signed it, or it was altered`)
	})
	assert.Equal(t, int32(2), iss.keysHits.Load(), "the keys were fetched again once")
}

// untilKeysFetched calls try until the issuer has served its key set want times, for at
// most 10 seconds. go-oidc answers a caller that arrives moments after a key fetch finished
// with that fetch's keys rather than fetching again (it clears its record of the fetch just
// after answering the fetch's own caller), so the refetch may take a second call.
func untilKeysFetched(t *testing.T, iss *testIssuer, want int32, try func()) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for iss.keysHits.Load() < want && !t.Failed() {
		require.True(t, time.Now().Before(deadline), "the keys were not fetched again within 10s")
		try()
		runtime.Gosched()
	}
}

// Within the refresh interval, tokens with unknown key ids do not reach the issuer.
func TestUnknownKeysDoNotFloodTheIssuer(t *testing.T) {
	key := rsaKey(t, 0, "rsa-0")
	iss := newIssuer(t, key)
	v, _ := newVerifier(t, config.OIDC{Issuer: iss.URL()})
	_, err := verify(t, v, sign(t, key, good(iss.URL(), "system:serviceaccount:billing:a")))
	require.NoError(t, err)
	for i := range 20 {
		_, err = verify(t, v, sign(t, ecKey(t, "forged-"+string(rune('a'+i))), good(iss.URL(), "system:serviceaccount:ops:admin")))
		require.ErrorIs(t, err, oidc.ErrUnauthorized)
	}
	assert.Equal(t, int32(1), iss.keysHits.Load())
}

// The issuer adds a key after the verifier cached the set: a token under the new key id
// makes the verifier fetch the set again, and verifies.
func TestKeyRotation(t *testing.T) {
	oldKey, newKey := rsaKey(t, 0, "2024"), ecKey(t, "2025")
	iss := newIssuer(t, oldKey)
	v, _ := newVerifier(t, config.OIDC{Issuer: iss.URL()})
	subject := "system:serviceaccount:billing:a"
	_, err := verify(t, v, sign(t, oldKey, good(iss.URL(), subject)))
	require.NoError(t, err)

	iss.publish(newKey)
	oidc.SetKeyRefreshInterval(v, 0) // as if the refresh interval had passed
	newToken := sign(t, newKey, good(iss.URL(), subject))
	var id oidc.Identity
	untilKeysFetched(t, iss, 2, func() {
		id, err = verify(t, v, newToken)
		if err != nil {
			assert.ErrorIs(t, err, oidc.ErrUnauthorized, "refused only with the keys of the fetch just finished")
		}
	})
	require.NoError(t, err)
	assert.Equal(t, subject, id.Subject)
	assert.Equal(t, int32(2), iss.keysHits.Load())

	_, err = verify(t, v, sign(t, oldKey, good(iss.URL(), subject)))
	require.NoError(t, err, "the old key still verifies, from the cache")
	assert.Equal(t, int32(2), iss.keysHits.Load())
}

func TestIssuerDownAtFirstUse(t *testing.T) {
	key := rsaKey(t, 0, "rsa-0")
	iss := newIssuer(t, key)
	v, log := newVerifier(t, config.OIDC{Issuer: iss.URL()})
	token := sign(t, key, good(iss.URL(), "system:serviceaccount:billing:a"))

	iss.down.Store(true)
	for range 2 { // a failed discovery is tried again on the next call
		_, err := verify(t, v, token)
		assert.ErrorIs(t, err, oidc.ErrUnavailable)
		assert.NotErrorIs(t, err, oidc.ErrUnauthorized)
		assert.EqualError(t, err, "OIDC issuer unavailable: cannot fetch the discovery document "+iss.URL()+
			"/.well-known/openid-configuration: the issuer answered 503 Service Unavailable")
	}
	assert.Equal(t, int32(2), iss.discoveryHits.Load())
	assert.Contains(t, log.String(), "issuer discovery failed")

	iss.down.Store(false)
	_, err := verify(t, v, token)
	require.NoError(t, err)
}

func TestKeysDownAtFirstUse(t *testing.T) {
	key := rsaKey(t, 0, "rsa-0")
	iss := newIssuer(t, key)
	v, _ := newVerifier(t, config.OIDC{Issuer: iss.URL()})
	token := sign(t, key, good(iss.URL(), "system:serviceaccount:billing:a"))

	iss.keysDown.Store(true)
	_, err := verify(t, v, token)
	assert.ErrorIs(t, err, oidc.ErrUnavailable)
	assert.EqualError(t, err, `OIDC issuer unavailable: cannot fetch the issuer's keys from `+iss.URL()+`/keys: the issuer answered 500 Internal Server Error`)

	iss.keysDown.Store(false)
	untilKeysFetched(t, iss, 2, func() {
		_, err = verify(t, v, token)
		if err != nil {
			assert.ErrorIs(t, err, oidc.ErrUnavailable, "only with the error of the fetch just finished")
		}
	})
	require.NoError(t, err)
	assert.Equal(t, int32(1), iss.discoveryHits.Load(), "discovery succeeded the first time and is kept")
	assert.Equal(t, int32(2), iss.keysHits.Load())
}

func TestIssuerUnreachable(t *testing.T) {
	key := rsaKey(t, 0, "rsa-0")
	closed := httptest.NewServer(nil)
	closed.Close()
	for _, cfg := range []config.OIDC{
		{Issuer: closed.URL},
		{Issuer: "https://issuer.example", JWKSURL: closed.URL + "/keys"},
	} {
		v, _ := newVerifier(t, cfg)
		_, err := verify(t, v, sign(t, key, good(cfg.Issuer, "system:serviceaccount:billing:a")))
		assert.ErrorIs(t, err, oidc.ErrUnavailable)
		assert.ErrorContains(t, err, "connection refused")
	}
}

func TestDiscoveryNamingAnotherIssuer(t *testing.T) {
	key := rsaKey(t, 0, "rsa-0")
	iss := newIssuer(t, key)
	iss.docIssuer = iss.URL() + "/"
	v, _ := newVerifier(t, config.OIDC{Issuer: iss.URL()})
	_, err := verify(t, v, sign(t, key, good(iss.URL(), "system:serviceaccount:billing:a")))
	assert.ErrorIs(t, err, oidc.ErrUnavailable)
	assert.EqualError(t, err, `OIDC issuer unavailable: the discovery document names the issuer "`+iss.URL()+`/", not "`+iss.URL()+
		`": set SCHEDULER_OIDC_ISSUER to the issuer exactly as its tokens name it`)
}

// With SCHEDULER_OIDC_JWKS_URL the keys come from there and the issuer is not asked for a
// discovery document; its iss is still checked.
func TestJWKSURL(t *testing.T) {
	key := ecKey(t, "ec-0")
	iss := newIssuer(t, key)
	const issuer = "https://kubernetes.default.svc"
	v, _ := newVerifier(t, config.OIDC{Issuer: issuer, JWKSURL: iss.URL() + "/keys"})
	id, err := verify(t, v, sign(t, key, good(issuer, "system:serviceaccount:ops:admin")))
	require.NoError(t, err)
	assert.Equal(t, []oidc.Grant{{Namespace: "*", Role: "admin"}}, id.Grants)

	_, err = verify(t, v, sign(t, key, good(iss.URL(), "system:serviceaccount:ops:admin")))
	assert.ErrorIs(t, err, oidc.ErrUnauthorized, "a token naming the key set's host as issuer")
	assert.Zero(t, iss.discoveryHits.Load())
	assert.Equal(t, int32(1), iss.keysHits.Load())
}

// Callers arriving together before discovery share one discovery and one key fetch.
func TestConcurrentFirstUse(t *testing.T) {
	key := rsaKey(t, 0, "rsa-0")
	iss := newIssuer(t, key)
	v, _ := newVerifier(t, config.OIDC{Issuer: iss.URL()})
	token := sign(t, key, good(iss.URL(), "system:serviceaccount:billing:a"))
	var wg sync.WaitGroup
	errs := make([]error, 8)
	for i := range errs {
		wg.Go(func() { _, errs[i] = verify(t, v, token) })
	}
	wg.Wait()
	assert.NoError(t, errors.Join(errs...))
	assert.Equal(t, int32(1), iss.discoveryHits.Load())
	assert.Equal(t, int32(1), iss.keysHits.Load())
}

// A caller that leaves while discovery is in flight gets its own error; the discovery goes
// on for the next caller.
func TestCallerLeavingWhileDiscovering(t *testing.T) {
	key := rsaKey(t, 0, "rsa-0")
	iss := newIssuer(t, key)
	release := iss.holdDiscovery()
	v, _ := newVerifier(t, config.OIDC{Issuer: iss.URL()})
	token := sign(t, key, good(iss.URL(), "system:serviceaccount:billing:a"))

	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, err := v.Verify(ctx, token)
	assert.ErrorIs(t, err, oidc.ErrUnavailable)
	assert.ErrorIs(t, err, context.Canceled)
	assert.EqualError(t, err, "OIDC issuer unavailable: the request ended while the issuer's discovery document was being fetched")

	release()
	_, err = verify(t, v, token)
	require.NoError(t, err)
	assert.Equal(t, int32(1), iss.discoveryHits.Load(), "the second caller waited for the first caller's discovery")
}
