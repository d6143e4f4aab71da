package api

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"time"
	"unicode/utf8"

	"github.com/go-chi/chi/v5"

	"github.com/schedulerhq/scheduler/client"
	"github.com/schedulerhq/scheduler/internal/access"
	"github.com/schedulerhq/scheduler/internal/httpx"
	"github.com/schedulerhq/scheduler/internal/namespace"
	"github.com/schedulerhq/scheduler/internal/store"
)

// Tokens made through the API (admin only): POST /v1/tokens shows the value once, GET
// /v1/tokens never, DELETE /v1/tokens/{id} revokes. A replica keeps only a SHA-256 of each
// value: 256 random bits need no slow hash, and a dump of the database holds no token.

// tokenPrefix starts every token value, so a leaked one is recognisable (secret scanners,
// logs) and never taken for a JWT.
const tokenPrefix = "sch_"

func newTokenView(t store.Token) client.Token {
	return client.Token{ID: t.ID, Name: t.Name, Role: t.Role, Namespace: t.Namespace, CreatedAt: t.CreatedAt.UTC(),
		CreatedBy: t.CreatedBy, ExpiresAt: utcPtr(t.ExpiresAt), RevokedAt: utcPtr(t.RevokedAt)}
}

// tokenRequest is POST /v1/tokens's: its body (client.TokenRequest), with the request.
type tokenRequest struct {
	client.TokenRequest
	routed

	// Derived by Validate: the namespace of a token that is not an admin's, the expiry, the
	// reason to record (nil for none).
	ns      *string
	expires *time.Time
	reason  *string
}

const maxTokenLifetime = 5 * 365 * 24 * time.Hour

var tokenIDRE = regexp.MustCompile(`^tok_[0-9a-f]{16}$`)

// Validate checks the request, every field at once, and sets what it derives.
func (req *tokenRequest) Validate() error {
	var fields []client.FieldError
	if n := utf8.RuneCountInString(req.Name); n < 1 || n > 100 || !utf8.ValidString(req.Name) || hasControl(req.Name) {
		fields = append(fields, client.FieldError{Field: "name", Detail: "required: 1 to 100 characters of text without control characters (e.g. \"billing-ci\")"})
	}
	var ns *string
	switch {
	case !access.ValidRole(req.Role):
		fields = append(fields, client.FieldError{Field: "role", Detail: fmt.Sprintf("%q is not a role: want viewer, editor or admin", req.Role)})
	case req.Role == access.RoleAdmin && req.Namespace != "":
		fields = append(fields, client.FieldError{Field: "namespace", Detail: "an admin token acts in every namespace: leave namespace out"})
	case req.Role != access.RoleAdmin && !namespace.Valid(req.Namespace):
		fields = append(fields, client.FieldError{Field: "namespace", Detail: fmt.Sprintf(
			"a %s token acts in one namespace: name it (1 to 63 lower-case letters, digits and '-')", req.Role)})
	case req.Role != access.RoleAdmin:
		ns = &req.Namespace
	}
	var expires *time.Time
	if req.ExpiresIn != "" {
		d, err := time.ParseDuration(req.ExpiresIn)
		if err != nil || d < time.Minute || d > maxTokenLifetime {
			fields = append(fields, client.FieldError{Field: "expires_in", Detail: fmt.Sprintf(
				"%q is not a duration between 1m and %s (e.g. \"720h\"); leave it out for a token that does not expire", req.ExpiresIn, maxTokenLifetime)})
		} else {
			t := time.Now().Add(d).UTC().Truncate(time.Second)
			expires = &t
		}
	}
	reason, p := validReason(&req.Reason)
	if p != nil {
		return p
	}
	if len(fields) > 0 {
		return httpx.Problem(http.StatusUnprocessableEntity, httpx.ProbInvalidRequest, "the token request has problems; see errors", fields...)
	}
	req.ns, req.expires, req.reason = ns, expires, reason
	return nil
}

func (s *Server) createToken(ctx context.Context, req *tokenRequest) (*createdToken, error) {
	r := req.r

	var secret, id [32]byte
	rand.Read(secret[:]) // never fails (crypto/rand)
	rand.Read(id[:8])
	value := tokenPrefix + base64.RawURLEncoding.EncodeToString(secret[:])
	hash := sha256.Sum256([]byte(value))
	p := principal(r.Context())
	t := store.Token{ID: "tok_" + hex.EncodeToString(id[:8]), Name: req.Name, Role: req.Role, Namespace: req.ns,
		CreatedBy: p.TokenName, ExpiresAt: req.expires}
	if t.CreatedBy == "" {
		t.CreatedBy = p.Kind
	}
	var view client.Token
	err := s.cfg.DB.Atomically(ctx, func(ex store.Executor) error {
		out, err := ex.CreateToken(ctx, t, hash[:])
		if err != nil {
			return err
		}
		view = newTokenView(out)
		a := s.actionIn(r, store.ActionTokenCreate, req.Namespace, req.reason)
		a.Detail, _ = json.Marshal(view) // without the value
		return ex.RecordAction(ctx, a)
	})
	switch {
	case errors.Is(err, store.ErrNamespaceNotFound):
		return nil, namespaceNotFoundProblem(req.Namespace)
	case err != nil:
		return nil, err
	}
	s.cfg.Log.InfoContext(ctx, "token created", "token_id", view.ID, "token_name", view.Name, "role", view.Role,
		"namespace", view.Namespace, "request_id", httpx.RequestID(ctx))
	view.Token = value
	return &createdToken{view}, nil
}

// createdToken is POST /v1/tokens's answer, which holds the token's value: no cache keeps it.
type createdToken struct{ client.Token }

// SetHeader forbids keeping the answer.
func (createdToken) SetHeader(h http.Header) { h.Set("Cache-Control", "no-store") }

func (s *Server) listTokens(ctx context.Context, _ *struct{}) (*client.Tokens, error) {
	list, err := s.cfg.DB.Tokens(ctx)
	if err != nil {
		return nil, err
	}
	views := make([]client.Token, len(list))
	for i, t := range list {
		views[i] = newTokenView(t)
	}
	return &client.Tokens{Tokens: views}, nil
}

// revokeToken revokes a token (204); every replica refuses it within storedTokenTTL.
func (s *Server) revokeToken(ctx context.Context, req *revokeRequest) (*struct{}, error) {
	id, r, reason := req.id, req.r, req.reason
	err := s.cfg.DB.Atomically(ctx, func(ex store.Executor) error {
		t, err := ex.RevokeToken(ctx, id)
		if err != nil {
			return err
		}
		ns := ""
		if t.Namespace != nil {
			ns = *t.Namespace
		}
		a := s.actionIn(r, store.ActionTokenRevoke, ns, reason)
		a.Detail, _ = json.Marshal(newTokenView(t))
		return ex.RecordAction(ctx, a)
	})
	switch {
	case errors.Is(err, store.ErrTokenNotFound):
		return nil, tokenNotFound(id)
	case err != nil:
		return nil, err
	}
	s.cfg.Log.InfoContext(ctx, "token revoked", "token_id", id, "request_id", httpx.RequestID(ctx))
	return nil, nil
}

// revokeRequest is DELETE /v1/tokens/{id}'s: the id, then the optional reason.
type revokeRequest struct {
	reasonRequest
	id string
}

// Extract reads the id; one that no token can have is not found before the body is read.
func (q *revokeRequest) Extract(r *http.Request) error {
	q.id = chi.URLParam(r, "id")
	if !tokenIDRE.MatchString(q.id) {
		return tokenNotFound(q.id)
	}
	return q.reasonRequest.Extract(r)
}

func tokenNotFound(id string) error {
	return httpx.Problem(http.StatusNotFound, probTokenNotFound, fmt.Sprintf("no token has id %q; GET /v1/tokens lists them", id),
		client.FieldError{Field: "id", Detail: "unknown token"})
}

// hasControl reports a control character, which has no place in a name shown in logs.
func hasControl(s string) bool {
	for _, r := range s {
		if r < 0x20 || r == 0x7f {
			return true
		}
	}
	return false
}

// whoami says who the caller is and what it may do, for the console and the CLI.
func (s *Server) whoami(ctx context.Context, _ *struct{}) (*client.Whoami, error) {
	p := principal(ctx)
	grants := make([]client.Grant, len(p.Grants))
	for i, g := range p.Grants {
		grants[i] = client.Grant{Namespace: g.Namespace, Role: g.Role}
	}
	return &client.Whoami{Kind: p.Kind, TokenID: p.TokenID, TokenName: p.TokenName, Grants: grants, Admin: p.IsAdmin()}, nil
}
