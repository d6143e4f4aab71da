package client

import (
	"context"
	"net/http"
	"net/url"
)

// The calls of the cluster, namespace, token and secret routes.

// Leader reads who leads the cluster; with no leader elected yet it is a *Problem of type
// no-leader (503).
func (c *Client) Leader(ctx context.Context) (*Leader, error) {
	var l Leader
	_, err := c.do(ctx, request{method: http.MethodGet, path: "/v1/leader", out: &l})
	return &l, err
}

// Instances lists the replicas.
func (c *Client) Instances(ctx context.Context) ([]Instance, error) {
	var list Instances
	_, err := c.do(ctx, request{method: http.MethodGet, path: "/v1/instances", out: &list})
	return list.Instances, err
}

// Partitions reads who holds each partition and how many each replica holds.
func (c *Client) Partitions(ctx context.Context) (*Partitions, error) {
	var p Partitions
	_, err := c.do(ctx, request{method: http.MethodGet, path: "/v1/partitions", out: &p})
	return &p, err
}

// StepDown asks the leader to resign now (admin); a follower takes over.
func (c *Client) StepDown(ctx context.Context, reason string) (*StepDown, error) {
	var s StepDown
	_, err := c.do(ctx, request{method: http.MethodPost, path: "/v1/leader/step-down", body: reasonBody(reason), out: &s})
	return &s, err
}

// Drain asks replica instanceID to release its partitions, step down as coordinator if it
// is, and take none until it restarts (admin).
func (c *Client) Drain(ctx context.Context, instanceID, reason string) (*Drain, error) {
	var d Drain
	path := "/v1/instances/" + url.PathEscape(instanceID) + "/drain"
	_, err := c.do(ctx, request{method: http.MethodPost, path: path, body: reasonBody(reason), out: &d})
	return &d, err
}

// Whoami says who the token is and what it may do.
func (c *Client) Whoami(ctx context.Context) (*Whoami, error) {
	var w Whoami
	_, err := c.do(ctx, request{method: http.MethodGet, path: "/v1/whoami", out: &w})
	return &w, err
}

func namespacePath(ns string) string { return "/v1/namespaces/" + url.PathEscape(ns) }

// ListNamespaces lists the namespaces the token may read.
func (c *Client) ListNamespaces(ctx context.Context) ([]Namespace, error) {
	var list Namespaces
	_, err := c.do(ctx, request{method: http.MethodGet, path: "/v1/namespaces", out: &list})
	return list.Namespaces, err
}

// GetNamespace reads namespace ns.
func (c *Client) GetNamespace(ctx context.Context, ns string) (*Namespace, error) {
	var n Namespace
	_, err := c.do(ctx, request{method: http.MethodGet, path: namespacePath(ns), out: &n})
	return &n, err
}

// NamespaceRequest is a namespace's quotas and outbound surface. PUT sets every quota: one
// left nil is unbounded. A surface list left nil stays as it is.
type NamespaceRequest struct {
	MaxJobs            *int      `json:"max_jobs"`
	MaxConcurrentCalls *int      `json:"max_concurrent_calls"`
	MinInterval        *string   `json:"min_interval"`
	SQLTargets         *[]string `json:"sql_targets,omitempty"`
	HTTPAllow          *[]string `json:"http_allow,omitempty"`
	EnvSecrets         *[]string `json:"env_secrets,omitempty"`
	Reason             string    `json:"reason,omitempty"`
}

// PutNamespace creates namespace ns or sets its quotas (admin); created says it was new.
func (c *Client) PutNamespace(ctx context.Context, ns string, req NamespaceRequest) (n *Namespace, created bool, err error) {
	n = &Namespace{}
	status, err := c.do(ctx, request{method: http.MethodPut, path: namespacePath(ns), body: req, out: n})
	return n, status == http.StatusCreated, err
}

// TokenRequest is a token to make: a viewer or editor of one namespace, or an admin.
type TokenRequest struct {
	Name      string `json:"name"`
	Role      string `json:"role"`
	Namespace string `json:"namespace,omitempty"`
	ExpiresIn string `json:"expires_in,omitempty"` // a Go duration, such as "720h"
	Reason    string `json:"reason,omitempty"`
}

// CreateToken makes a token (admin); the answer's Token is its value, shown this once.
func (c *Client) CreateToken(ctx context.Context, req TokenRequest) (*Token, error) {
	var t Token
	_, err := c.do(ctx, request{method: http.MethodPost, path: "/v1/tokens", body: req, out: &t})
	return &t, err
}

// ListTokens lists the tokens made through the API (admin), never their values.
func (c *Client) ListTokens(ctx context.Context) ([]Token, error) {
	var list Tokens
	_, err := c.do(ctx, request{method: http.MethodGet, path: "/v1/tokens", out: &list})
	return list.Tokens, err
}

// RevokeToken revokes token id (admin).
func (c *Client) RevokeToken(ctx context.Context, id, reason string) error {
	_, err := c.do(ctx, request{method: http.MethodDelete, path: "/v1/tokens/" + url.PathEscape(id), body: reasonBody(reason)})
	return err
}

func (c *Client) secretsPath() string { return namespacePath(c.namespace) + "/secrets" }

// SecretRequest is PUT …/secrets/{name}'s body: the value (required) and the hosts it may
// be sent to (1 to 32).
type SecretRequest struct {
	AllowedHosts []string `json:"allowed_hosts"`
	Value        string   `json:"value"`
	Reason       string   `json:"reason,omitempty"`
}

// PutSecret creates or replaces a secret of the Client's namespace, sent only to
// allowedHosts.
func (c *Client) PutSecret(ctx context.Context, name, value string, allowedHosts []string) (*Secret, error) {
	var s Secret
	body := SecretRequest{Value: value, AllowedHosts: allowedHosts}
	_, err := c.do(ctx, request{method: http.MethodPut, path: c.secretsPath() + "/" + url.PathEscape(name), body: body, out: &s})
	return &s, err
}

// ListSecrets lists the namespace's secrets, never their values.
func (c *Client) ListSecrets(ctx context.Context) ([]Secret, error) {
	var list Secrets
	_, err := c.do(ctx, request{method: http.MethodGet, path: c.secretsPath(), out: &list})
	return list.Secrets, err
}

// DeleteSecret deletes a secret of the namespace.
func (c *Client) DeleteSecret(ctx context.Context, name string) error {
	_, err := c.do(ctx, request{method: http.MethodDelete, path: c.secretsPath() + "/" + url.PathEscape(name)})
	return err
}
