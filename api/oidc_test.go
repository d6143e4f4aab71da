package api

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schedulerhq/scheduler/internal/config"
	"github.com/schedulerhq/scheduler/internal/oidc"
)

// localIssuer is an OIDC issuer the test runs: a discovery document and a key set holding
// one RSA key the test made.
type localIssuer struct {
	url string
	key *rsa.PrivateKey
}

func newLocalIssuer(t *testing.T) *localIssuer {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	require.NoError(t, err)
	iss := &localIssuer{key: key}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /.well-known/openid-configuration", func(w http.ResponseWriter, r *http.Request) {
		json.NewEncoder(w).Encode(map[string]any{"issuer": iss.url, "jwks_uri": iss.url + "/keys"})
	})
	mux.HandleFunc("GET /keys", func(w http.ResponseWriter, r *http.Request) {
		json.NewEncoder(w).Encode(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: &key.PublicKey, KeyID: "k1", Algorithm: "RS256", Use: "sig"}}})
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	iss.url = srv.URL
	return iss
}

// token signs claims with alg and key under kid; the claims default to a valid token of
// subject sub for audience "scheduler".
func (iss *localIssuer) token(t *testing.T, sub string, alg jose.SignatureAlgorithm, key any, kid string, edit func(map[string]any)) string {
	t.Helper()
	now := time.Now()
	claims := map[string]any{"iss": iss.url, "sub": sub, "aud": "scheduler", "iat": now.Unix(), "nbf": now.Unix(), "exp": now.Add(time.Hour).Unix()}
	if edit != nil {
		edit(claims)
	}
	payload, _ := json.Marshal(claims)
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: alg, Key: key}, (&jose.SignerOptions{}).WithHeader("kid", kid))
	require.NoError(t, err)
	obj, err := signer.Sign(payload)
	require.NoError(t, err)
	s, err := obj.CompactSerialize()
	require.NoError(t, err)
	return s
}

// TestServiceAccountSignsInWithItsIssuersToken: a JWT from the configured issuer whose
// subject a binding names acts with the binding's role; every bad token is a 401.
func TestServiceAccountSignsInWithItsIssuersToken(t *testing.T) {
	iss := newLocalIssuer(t)
	tm := newTeam(t)
	verifier := oidc.New(config.OIDC{Issuer: iss.url, Audience: "scheduler", Bindings: []config.OIDCBinding{
		{Subject: "system:serviceaccount:billing:*", Namespace: "billing", Role: "editor"}}}, nil, nil)
	tm.server = NewServer(Config{DB: tm.db.DB, InstanceID: testInstance, Jobs: testJobs(t), APIToken: testToken, OIDC: verifier})
	tm.http.Config.Handler = tm.server.Handler()
	bearer := func(tok string) header { return header{"Authorization": "Bearer " + tok} }

	good := iss.token(t, "system:serviceaccount:billing:reporter", jose.RS256, iss.key, "k1", nil)
	res := tm.do("POST", "/v1/namespaces/billing/jobs/report/pause", "", bearer(good))
	assert.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	res = tm.do("GET", "/v1/namespaces/ops/jobs", "", bearer(good))
	assert.Equal(t, http.StatusForbidden, res.Status, "%s", res.Body)
	res = tm.do("GET", "/v1/audit?namespace=billing", "", nil)
	row := res.JSON(t)["actions"].([]any)[0].(map[string]any)
	assert.Equal(t, "oidc", row["token_kind"])
	assert.Equal(t, "system:serviceaccount:billing:reporter", row["token_name"])

	otherKey, err := rsa.GenerateKey(rand.Reader, 2048)
	require.NoError(t, err)
	pubDER, err := x509.MarshalPKIXPublicKey(&iss.key.PublicKey)
	require.NoError(t, err)
	sub := "system:serviceaccount:billing:reporter"
	noneHeader := base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"none","kid":"k1"}`))
	goodParts := strings.Split(good, ".")
	bad := map[string]string{
		"expired":          iss.token(t, sub, jose.RS256, iss.key, "k1", func(c map[string]any) { c["exp"] = time.Now().Add(-time.Hour).Unix() }),
		"not yet valid":    iss.token(t, sub, jose.RS256, iss.key, "k1", func(c map[string]any) { c["nbf"] = time.Now().Add(time.Hour).Unix() }),
		"wrong issuer":     iss.token(t, sub, jose.RS256, iss.key, "k1", func(c map[string]any) { c["iss"] = "https://evil.example" }),
		"wrong audience":   iss.token(t, sub, jose.RS256, iss.key, "k1", func(c map[string]any) { c["aud"] = "another-service" }),
		"unknown key":      iss.token(t, sub, jose.RS256, otherKey, "k2", nil),
		"alg none":         noneHeader + "." + goodParts[1] + ".",
		"HS256 public key": iss.token(t, sub, jose.HS256, pubDER, "k1", nil),
		"unbound subject":  iss.token(t, "system:serviceaccount:ops:runner", jose.RS256, iss.key, "k1", nil),
	}
	for why, tok := range bad {
		res := tm.do("GET", "/v1/namespaces/billing/jobs", "", bearer(tok))
		assert.Equal(t, http.StatusUnauthorized, res.Status, "%s: %s", why, res.Body)
	}
}
