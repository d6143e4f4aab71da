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

	"github.com/schedulerhq/scheduler/internal/access"
	"github.com/schedulerhq/scheduler/internal/namespace"
	"github.com/schedulerhq/scheduler/internal/store"
)

// Tokens made through the API (admin only): POST /v1/tokens shows the value once, GET
// /v1/tokens never, DELETE /v1/tokens/{id} revokes. A replica keeps only a SHA-256 of each
// value: 256 random bits need no slow hash, and a dump of the database holds no token.

// tokenPrefix starts every token value, so a leaked one is recognisable (secret scanners,
// logs) and never taken for a JWT.
const tokenPrefix = "sch_"

// tokenView is a token as the API shows it; Token is set only in POST's answer.
type tokenView struct {
	ID        string     `json:"id"`
	Token     string     `json:"token,omitempty"`
	Name      string     `json:"name"`
	Role      string     `json:"role"`
	Namespace *string    `json:"namespace"`
	CreatedAt time.Time  `json:"created_at"`
	CreatedBy string     `json:"created_by"`
	ExpiresAt *time.Time `json:"expires_at"`
	RevokedAt *time.Time `json:"revoked_at"`
}

func newTokenView(t store.Token) tokenView {
	return tokenView{ID: t.ID, Name: t.Name, Role: t.Role, Namespace: t.Namespace, CreatedAt: t.CreatedAt.UTC(),
		CreatedBy: t.CreatedBy, ExpiresAt: utcPtr(t.ExpiresAt), RevokedAt: utcPtr(t.RevokedAt)}
}

// tokenRequest is POST /v1/tokens's body.
type tokenRequest struct {
	Name      string  `json:"name"`
	Namespace string  `json:"namespace"`
	Role      string  `json:"role"`
	ExpiresIn string  `json:"expires_in"`
	Reason    *string `json:"reason"`
}

const maxTokenLifetime = 5 * 365 * 24 * time.Hour

var tokenIDRE = regexp.MustCompile(`^tok_[0-9a-f]{16}$`)

func (s *Server) createToken(w http.ResponseWriter, r *http.Request) {
	body, ok := readBody(w, r)
	if !ok {
		return
	}
	var req tokenRequest
	if body != nil && !decodeStrict(w, r, body, &req) {
		return
	}
	var fields []FieldError
	if n := utf8.RuneCountInString(req.Name); n < 1 || n > 100 || !utf8.ValidString(req.Name) || hasControl(req.Name) {
		fields = append(fields, FieldError{Field: "name", Detail: "required: 1 to 100 characters of text without control characters (e.g. \"billing-ci\")"})
	}
	var ns *string
	switch {
	case !access.ValidRole(req.Role):
		fields = append(fields, FieldError{Field: "role", Detail: fmt.Sprintf("%q is not a role: want viewer, editor or admin", req.Role)})
	case req.Role == access.RoleAdmin && req.Namespace != "":
		fields = append(fields, FieldError{Field: "namespace", Detail: "an admin token acts in every namespace: leave namespace out"})
	case req.Role != access.RoleAdmin && !namespace.Valid(req.Namespace):
		fields = append(fields, FieldError{Field: "namespace", Detail: fmt.Sprintf(
			"a %s token acts in one namespace: name it (1 to 63 lower-case letters, digits and '-')", req.Role)})
	case req.Role != access.RoleAdmin:
		ns = &req.Namespace
	}
	var expires *time.Time
	if req.ExpiresIn != "" {
		d, err := time.ParseDuration(req.ExpiresIn)
		if err != nil || d < time.Minute || d > maxTokenLifetime {
			fields = append(fields, FieldError{Field: "expires_in", Detail: fmt.Sprintf(
				"%q is not a duration between 1m and %s (e.g. \"720h\"); leave it out for a token that does not expire", req.ExpiresIn, maxTokenLifetime)})
		} else {
			t := time.Now().Add(d).UTC().Truncate(time.Second)
			expires = &t
		}
	}
	reason, ok := checkReason(w, r, req.Reason)
	if !ok {
		return
	}
	if len(fields) > 0 {
		writeProblem(w, r, http.StatusUnprocessableEntity, probInvalidRequest, "the token request has problems; see errors", fields...)
		return
	}

	var secret, id [32]byte
	rand.Read(secret[:]) // never fails (crypto/rand)
	rand.Read(id[:8])
	value := tokenPrefix + base64.RawURLEncoding.EncodeToString(secret[:])
	hash := sha256.Sum256([]byte(value))
	p := principal(r.Context())
	t := store.Token{ID: "tok_" + hex.EncodeToString(id[:8]), Name: req.Name, Role: req.Role, Namespace: ns,
		CreatedBy: p.TokenName, ExpiresAt: expires}
	if t.CreatedBy == "" {
		t.CreatedBy = p.Kind
	}
	ctx, cancel := context.WithTimeout(r.Context(), queryTimeout)
	defer cancel()
	var view tokenView
	err := s.cfg.DB.Atomically(ctx, func(ex store.Executor) error {
		out, err := ex.CreateToken(ctx, t, hash[:])
		if err != nil {
			return err
		}
		view = newTokenView(out)
		a := s.actionIn(r, store.ActionTokenCreate, req.Namespace, reason)
		a.Detail, _ = json.Marshal(view) // without the value
		return ex.RecordAction(ctx, a)
	})
	switch {
	case errors.Is(err, store.ErrNamespaceNotFound):
		namespaceNotFound(w, r, req.Namespace)
		return
	case err != nil:
		s.databaseProblem(w, r, err)
		return
	}
	s.cfg.Log.InfoContext(ctx, "token created", "token_id", view.ID, "token_name", view.Name, "role", view.Role,
		"namespace", view.Namespace, "request_id", requestID(ctx))
	view.Token = value
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, http.StatusCreated, view)
}

func (s *Server) listTokens(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), queryTimeout)
	defer cancel()
	list, err := s.cfg.DB.Tokens(ctx)
	if err != nil {
		s.databaseProblem(w, r, err)
		return
	}
	views := make([]tokenView, len(list))
	for i, t := range list {
		views[i] = newTokenView(t)
	}
	writeJSON(w, http.StatusOK, map[string]any{"tokens": views})
}

// revokeToken revokes a token (204); every replica refuses it within storedTokenTTL.
func (s *Server) revokeToken(w http.ResponseWriter, r *http.Request) {
	id := chi.URLParam(r, "id")
	if !tokenIDRE.MatchString(id) {
		tokenNotFound(w, r, id)
		return
	}
	reason, ok := actionReason(w, r)
	if !ok {
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), queryTimeout)
	defer cancel()
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
		tokenNotFound(w, r, id)
		return
	case err != nil:
		s.databaseProblem(w, r, err)
		return
	}
	s.cfg.Log.InfoContext(ctx, "token revoked", "token_id", id, "request_id", requestID(ctx))
	w.WriteHeader(http.StatusNoContent)
}

func tokenNotFound(w http.ResponseWriter, r *http.Request, id string) {
	writeProblem(w, r, http.StatusNotFound, probTokenNotFound, fmt.Sprintf("no token has id %q; GET /v1/tokens lists them", id),
		FieldError{Field: "id", Detail: "unknown token"})
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
func (s *Server) whoami(w http.ResponseWriter, r *http.Request) {
	p := principal(r.Context())
	grants := p.Grants
	if grants == nil {
		grants = []access.Grant{}
	}
	writeJSON(w, http.StatusOK, map[string]any{"kind": p.Kind, "token_id": p.TokenID, "token_name": p.TokenName,
		"grants": grants, "admin": p.IsAdmin()})
}
