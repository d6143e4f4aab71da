package idp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"

	jose "github.com/go-jose/go-jose/v4"

	"github.com/schedulerhq/scheduler/internal/store"
)

// Discovery is the OpenID Connect discovery document: enough for a verifier (go-oidc's
// NewProvider, and the other stock libraries) to find the key set and the algorithm. The
// scheduler has no authorization endpoint: it signs tokens for its own calls only.
type Discovery struct {
	Issuer                           string   `json:"issuer"`
	JWKSURI                          string   `json:"jwks_uri"`
	ResponseTypesSupported           []string `json:"response_types_supported"`
	SubjectTypesSupported            []string `json:"subject_types_supported"`
	IDTokenSigningAlgValuesSupported []string `json:"id_token_signing_alg_values_supported"`
	ClaimsSupported                  []string `json:"claims_supported"`
}

// Discovery is the replicas' discovery document.
func (k *Keys) Discovery() Discovery {
	return Discovery{Issuer: k.c.Issuer, JWKSURI: k.c.Issuer + JWKSPath,
		ResponseTypesSupported: []string{"id_token"}, SubjectTypesSupported: []string{"public"},
		IDTokenSigningAlgValuesSupported: []string{Alg},
		ClaimsSupported:                  []string{"iss", "sub", "aud", "iat", "nbf", "exp", "jti", "namespace", "job", "run_id", "scheduled_at", "attempt"}}
}

// JWKS is the key set verifiers fetch: the public halves of the next, current and previous
// keys, made first when there are none.
func (k *Keys) JWKS(ctx context.Context) (jose.JSONWebKeySet, error) {
	if err := k.CanSign(); err != nil {
		return jose.JSONWebKeySet{}, err
	}
	keys, _, err := k.fresh(ctx)
	if keys == nil && err != nil {
		return jose.JSONWebKeySet{}, err
	}
	return publicSet(keys)
}

// publicSet decodes the stored public halves. Each is checked public: a row written by hand
// with a private key in public_jwk is refused rather than published.
func publicSet(keys []store.OIDCKey) (jose.JSONWebKeySet, error) {
	set := jose.JSONWebKeySet{Keys: make([]jose.JSONWebKey, 0, len(keys))}
	for _, key := range keys {
		var jwk jose.JSONWebKey
		if err := jwk.UnmarshalJSON(key.PublicJWK); err != nil {
			return set, fmt.Errorf("the public half of OIDC signing key %s: %w", key.KID, err)
		}
		if !jwk.IsPublic() {
			return set, fmt.Errorf("the public half of OIDC signing key %s holds a private key: refused", key.KID)
		}
		set.Keys = append(set.Keys, jwk)
	}
	return set, nil
}

// ServeHTTP answers GET DiscoveryPath and GET JWKSPath, without a token, cacheable for
// JWKSMaxAge (PrePublication is longer, so a cached key set holds the next key).
func (k *Keys) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var body any
	switch r.URL.Path {
	case DiscoveryPath:
		if err := k.CanSign(); err != nil {
			problem(w, http.StatusNotFound, "oidc-off", err.Error())
			return
		}
		body = k.Discovery()
	case JWKSPath:
		set, err := k.JWKS(r.Context())
		switch {
		case errors.Is(err, ErrNoSecretKey):
			problem(w, http.StatusNotFound, "oidc-off", err.Error())
			return
		case err != nil:
			k.c.Log.ErrorContext(r.Context(), "serving the OIDC key set failed", "error", err)
			w.Header().Set("Retry-After", "1")
			problem(w, http.StatusServiceUnavailable, "database-unavailable", "the key set could not be read; retry, and see the replica's log")
			return
		}
		body = set
	default:
		problem(w, http.StatusNotFound, "not-found", "no such document")
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "public, max-age="+strconv.Itoa(int(JWKSMaxAge.Seconds())))
	_ = json.NewEncoder(w).Encode(body)
}

func problem(w http.ResponseWriter, status int, slug, detail string) {
	w.Header().Set("Content-Type", "application/problem+json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"type": "https://scheduler.dev/problems/" + slug,
		"title": http.StatusText(status), "status": status, "detail": detail})
}
