package client

import (
	"context"
	"net/http"
	"time"
)

// The signing keys of the OIDC tokens the scheduler gives its targets (http.auth.oidc).

// OIDCKey is a signing key as an admin sees it: never a private part.
type OIDCKey struct {
	KID        string     `json:"kid"`
	Alg        string     `json:"alg"`
	State      string     `json:"state"`
	CreatedAt  time.Time  `json:"created_at"`
	CurrentAt  *time.Time `json:"current_at,omitempty"`
	PreviousAt *time.Time `json:"previous_at,omitempty"`
	RetiredAt  *time.Time `json:"retired_at,omitempty"`
}

// OIDCKeys are the issuer and its keys; Rotated says what a rotation did (RotateOIDCKeys).
type OIDCKeys struct {
	Issuer  string       `json:"issuer"`
	Keys    []OIDCKey    `json:"keys"`
	Rotated *OIDCRotated `json:"rotated,omitempty"`
}

// OIDCRotated names the key that signs from now on, the one that stays published until its
// tokens expire, and the keys retired.
type OIDCRotated struct {
	Current  string   `json:"current"`
	Previous string   `json:"previous"`
	Retired  []string `json:"retired"`
}

// OIDCKeys lists the signing keys (admin).
func (c *Client) OIDCKeys(ctx context.Context) (*OIDCKeys, error) {
	var k OIDCKeys
	_, err := c.do(ctx, request{method: http.MethodGet, path: "/v1/oidc/keys", out: &k})
	return &k, err
}

// RotateOIDCKeys makes the published next key the one that signs (admin, audited); too soon
// after the last rotation it is a *Problem of type rotation-too-soon.
func (c *Client) RotateOIDCKeys(ctx context.Context, reason string) (*OIDCKeys, error) {
	var k OIDCKeys
	_, err := c.do(ctx, request{method: http.MethodPost, path: "/v1/oidc/keys/rotate", body: reasonBody(reason), out: &k})
	return &k, err
}
