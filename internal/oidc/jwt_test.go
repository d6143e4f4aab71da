package oidc_test

import (
	"encoding/base64"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/schedulerhq/scheduler/internal/oidc"
)

func TestLooksLikeJWT(t *testing.T) {
	enc := base64.RawURLEncoding.EncodeToString
	header := enc([]byte(`{"alg":"RS256","kid":"k"}`))
	claims := enc([]byte(`{"sub":"x"}`))
	signature := enc([]byte("signature"))

	key := rsaKey(t, 0, "rsa-0")
	assert.True(t, oidc.LooksLikeJWT(sign(t, key, good("https://issuer.example", "x"))))
	assert.True(t, oidc.LooksLikeJWT(sign(t, ecKey(t, "ec"), good("https://issuer.example", "x"))))
	assert.True(t, oidc.LooksLikeJWT(header+"."+claims+"."+signature))
	assert.True(t, oidc.LooksLikeJWT(unsigned(t, "k", good("https://issuer.example", "x"))), "unsigned: Verify refuses it with the reason")

	for _, s := range []string{
		"",
		"opaque-api-token-0123456789",
		"a.b",
		header + "." + claims,
		header + "." + claims + "." + signature + ".x",
		"." + claims + "." + signature,
		header + ".." + signature,
		header + "=." + claims + "." + signature, // padded
		header + "." + claims + "." + "c2ln+/",   // standard, not URL, alphabet
		enc([]byte(`{"typ":"JWT"}`)) + "." + claims + "." + signature,
		enc([]byte(`{"alg":5}`)) + "." + claims + "." + signature,
		enc([]byte(`["alg"]`)) + "." + claims + "." + signature,
		enc([]byte(`not json`)) + "." + claims + "." + signature,
	} {
		assert.False(t, oidc.LooksLikeJWT(s), s)
	}
}
