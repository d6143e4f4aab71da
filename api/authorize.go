package api

import (
	"context"
	"crypto/sha256"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/schedulerhq/scheduler/client"
	"github.com/schedulerhq/scheduler/internal/access"
	"github.com/schedulerhq/scheduler/internal/httpx"
	"github.com/schedulerhq/scheduler/internal/namespace"
	"github.com/schedulerhq/scheduler/internal/store"
)

// What each route may do is decided here, from the request's principal (access.Principal)
// and the namespace the route names: /v1/namespaces/{ns}/… names ns, /v1/jobs… names
// namespace default (where the built-in jobs live too).

// Identifier signs in a service account: it returns the principal of a JWT bearer, found
// false when the token is not valid, and an error when the issuer could not be asked.
type Identifier interface {
	Identify(ctx context.Context, jwt string) (p access.Principal, found bool, err error)
}

// storedTokenTTL is how long a replica trusts its last lookup of a stored token: a token
// revoked on one replica is refused by every replica within this time (and the issue's
// bound of 2 s).
const storedTokenTTL = time.Second

// storedTokens caches lookups of tokens made through the API, by the hash of their value.
// Only tokens found are kept: a flood of wrong tokens costs a query each and no memory.
type storedTokens struct {
	mu   sync.Mutex
	byID map[[sha256.Size]byte]cachedToken
}

type cachedToken struct {
	p  access.Principal
	at time.Time
}

// maxCachedTokens bounds the cache; past it, the cache starts again empty.
const maxCachedTokens = 10_000

func (c *storedTokens) lookup(ctx context.Context, db *store.DB, h [sha256.Size]byte) (access.Principal, bool, error) {
	now := time.Now()
	c.mu.Lock()
	if t, ok := c.byID[h]; ok && now.Sub(t.at) < storedTokenTTL {
		c.mu.Unlock()
		return t.p, true, nil
	}
	c.mu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, queryTimeout)
	defer cancel()
	t, ok, err := db.ActiveToken(ctx, h[:])
	if err != nil || !ok {
		return access.Principal{}, false, err
	}
	p := tokenPrincipal(t)
	c.mu.Lock()
	if c.byID == nil || len(c.byID) >= maxCachedTokens {
		c.byID = make(map[[sha256.Size]byte]cachedToken)
	}
	c.byID[h] = cachedToken{p: p, at: now}
	c.mu.Unlock()
	return p, true, nil
}

// tokenPrincipal is a stored token's principal.
func tokenPrincipal(t store.Token) access.Principal {
	ns := access.AllNamespaces
	if t.Namespace != nil {
		ns = *t.Namespace
	}
	return access.Principal{Kind: access.KindToken, TokenID: t.ID, TokenName: t.Name,
		Grants: []access.Grant{{Namespace: ns, Role: t.Role}}}
}

// describe names a principal in a problem's detail: which token, and what it may do.
func describe(p access.Principal) string {
	name := "this token"
	switch {
	case p.Kind == access.KindOIDC:
		name = fmt.Sprintf("service account %q", p.TokenName)
	case p.TokenName != "":
		name = fmt.Sprintf("token %q", p.TokenName)
	}
	grants := make([]string, len(p.Grants))
	for i, g := range p.Grants {
		grants[i] = g.Role + " of " + g.Namespace
		if g.Namespace == access.AllNamespaces {
			grants[i] = g.Role + " of every namespace"
		}
	}
	if len(grants) == 0 {
		return name + " (no role)"
	}
	return name + " (" + strings.Join(grants, ", ") + ")"
}

// routeNamespace is the namespace a route names: {ns}, or default on /v1/jobs….
func routeNamespace(r *http.Request) string {
	if ns := chi.URLParam(r, "ns"); ns != "" {
		return ns
	}
	return namespace.Default
}

// forbid answers 403 for an action the caller's grants do not cover, and audits it. Its
// detail says what the caller's own grants are and names nothing of a namespace the caller
// cannot read: what is refused is "this namespace", the one the caller named itself.
func (s *Server) forbid(w http.ResponseWriter, r *http.Request, what string) {
	httpx.WriteProblemFor(w, r, s.forbidden(r, what))
}

// forbidden is forbid's refusal, recorded, for an endpoint to return.
func (s *Server) forbidden(r *http.Request, what string) *client.Problem {
	s.refused(r, probForbidden)
	return httpx.Problem(http.StatusForbidden, probForbidden, fmt.Sprintf("%s may not %s", describe(principal(r.Context())), what))
}

// mayRead and mayEdit guard the routes of a namespace: reading needs a viewer's grant,
// changing an editor's.
func (s *Server) mayRead(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ns := routeNamespace(r)
		if !principal(r.Context()).CanRead(ns) {
			s.forbid(w, r, "read this namespace")
			return
		}
		next.ServeHTTP(w, r)
	})
}

func (s *Server) mayEdit(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ns := routeNamespace(r)
		if !principal(r.Context()).CanEdit(ns) {
			s.forbid(w, r, "change this namespace's jobs or secrets (an editor of it may)")
			return
		}
		next.ServeHTTP(w, r)
	})
}

// adminOnly guards what only an admin touches: namespaces, tokens and leadership.
func (s *Server) adminOnly(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !principal(r.Context()).IsAdmin() {
			s.forbid(w, r, "manage namespaces, tokens or leadership: only an admin may")
			return
		}
		next.ServeHTTP(w, r)
	})
}

type namespaceKey struct{}

// namespaceExists answers 404 on a route of a namespace that does not exist, after the
// caller was found allowed in it (so a stranger cannot probe which namespaces exist), and
// hands the handler the namespace's row (its quotas).
func (s *Server) namespaceExists(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ns := routeNamespace(r)
		n, ok := s.loadNamespace(w, r, ns)
		if !ok {
			return
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), namespaceKey{}, n)))
	})
}

// loadNamespace reads namespace ns, or answers 404 (or 503) and returns false.
func (s *Server) loadNamespace(w http.ResponseWriter, r *http.Request, ns string) (store.Namespace, bool) {
	if !namespace.Valid(ns) {
		namespaceNotFound(w, r, ns)
		return store.Namespace{}, false
	}
	ctx, cancel := context.WithTimeout(r.Context(), queryTimeout)
	defer cancel()
	n, err := s.cfg.DB.Namespace(ctx, ns)
	switch {
	case err == store.ErrNamespaceNotFound:
		namespaceNotFound(w, r, ns)
		return n, false
	case err != nil:
		s.databaseProblem(w, r, err)
		return n, false
	}
	return n, true
}

// routeNamespaceRow is the row namespaceExists read; on /v1/jobs…, default's is read then.
func (s *Server) routeNamespaceRow(ctx context.Context) (store.Namespace, error) {
	if n, ok := ctx.Value(namespaceKey{}).(store.Namespace); ok {
		return n, nil
	}
	ctx, cancel := context.WithTimeout(ctx, queryTimeout)
	defer cancel()
	return s.cfg.DB.Namespace(ctx, namespace.Default)
}

func namespaceNotFound(w http.ResponseWriter, r *http.Request, ns string) {
	httpx.WriteProblemFor(w, r, namespaceNotFoundProblem(ns))
}

func namespaceNotFoundProblem(ns string) *client.Problem {
	return httpx.Problem(http.StatusNotFound, probNamespaceNotFound, fmt.Sprintf(
		"no namespace named %q; an admin creates it with PUT /v1/namespaces/%s (GET /v1/namespaces lists them)", ns, ns),
		client.FieldError{Field: "namespace", Detail: "unknown namespace"})
}
