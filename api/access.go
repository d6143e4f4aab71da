package api

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strings"

	"github.com/schedulerhq/scheduler/client"
	"github.com/schedulerhq/scheduler/internal/access"
	"github.com/schedulerhq/scheduler/internal/httpx"
	"github.com/schedulerhq/scheduler/internal/oidc"
)

// Token kinds, as the audit log records them (token_kind): access's kinds of principal,
// and "invalid" for a refused request whose token matched none.
const (
	tokenNone    = access.KindNone
	tokenInvalid = "invalid"
)

type principalKey struct{}

// principal returns the caller the request was authenticated as.
func principal(ctx context.Context) access.Principal {
	p, _ := ctx.Value(principalKey{}).(access.Principal)
	return p
}

// tokenKind returns the kind of credential the request was authenticated with.
func tokenKind(ctx context.Context) string { return principal(ctx).Kind }

// envTokens are the environment's tokens, hashed so the constant-time comparison does not
// leak a token's length either.
type envTokens struct {
	principals []access.Principal
	hashes     [][sha256.Size]byte
}

func newEnvTokens(full, next, read string) envTokens {
	var a envTokens
	for _, t := range []struct {
		token string
		p     access.Principal
	}{
		{full, access.Admin(access.KindEnvAdmin, "env:SCHEDULER_API_TOKEN", "SCHEDULER_API_TOKEN")},
		{next, access.Admin(access.KindEnvNext, "env:SCHEDULER_API_TOKEN_NEXT", "SCHEDULER_API_TOKEN_NEXT")},
		{read, access.Principal{Kind: access.KindEnvRead, TokenID: "env:SCHEDULER_API_READ_TOKEN", TokenName: "SCHEDULER_API_READ_TOKEN",
			Grants: []access.Grant{{Namespace: access.AllNamespaces, Role: access.RoleViewer}}}},
	} {
		if t.token != "" {
			a.principals = append(a.principals, t.p)
			a.hashes = append(a.hashes, sha256.Sum256([]byte(t.token)))
		}
	}
	return a
}

// configured reports whether the replica requires a token.
func (a envTokens) configured() bool { return len(a.hashes) > 0 }

// match returns the principal of the environment's token given. Every configured token is
// compared, so the time taken does not say which one matched.
func (a envTokens) match(h [sha256.Size]byte) (access.Principal, bool) {
	found := -1
	for i := range a.hashes {
		if subtle.ConstantTimeCompare(h[:], a.hashes[i][:]) == 1 {
			found = i
		}
	}
	if found < 0 {
		return access.Principal{}, false
	}
	return a.principals[found], true
}

// authenticate finds who calls every /v1 route: one of the environment's tokens
// (SCHEDULER_API_TOKEN, SCHEDULER_API_TOKEN_NEXT, the read-only SCHEDULER_API_READ_TOKEN),
// a token made through POST /v1/tokens, or a service account's JWT when OIDC is configured.
// Tokens travel only in the Authorization header, never in a cookie, so a page on another
// site cannot make a browser send one. A replica without an environment token answers only
// loopback (checkHost) and treats a caller without an Authorization header as an admin; a
// token it is sent still narrows the caller to that token's grants, and one it cannot
// honour is refused 401 as on any replica.
func (s *Server) authenticate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h, given := r.Header.Get("Authorization"), bearer(r)
		p, found, err := s.identify(r.Context(), given)
		switch {
		case err != nil:
			s.cfg.Log.WarnContext(r.Context(), "authentication could not finish", "error", err, "request_id", httpx.RequestID(r.Context()))
			w.Header().Set("Retry-After", "1")
			httpx.WriteProblem(w, r, http.StatusServiceUnavailable, probAuthUnavailable,
				"the token could not be checked (the database or the OIDC issuer did not answer); retry")
			return
		case !found && h == "" && !s.env.configured():
			p = access.Admin(tokenNone, "", "")
		case !found:
			// A credential this replica cannot honour (revoked, expired, made up, or of
			// another scheme) is refused even where no token is required: treated as none,
			// it would act as the loopback admin.
			s.refused(r, probUnauthorized)
			w.Header().Set("WWW-Authenticate", `Bearer realm="scheduler"`)
			detail := "send an API token as \"Authorization: Bearer <token>\": SCHEDULER_API_TOKEN, a token made with `scheduler token create`, or a service account's token"
			if h != "" {
				detail = "the bearer token is wrong, expired or revoked; " + detail
			}
			httpx.WriteProblem(w, r, http.StatusUnauthorized, probUnauthorized, detail, client.FieldError{Field: "Authorization", Detail: detail})
			return
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), principalKey{}, p)))
	})
}

// metricsGuard asks GET /metrics for SCHEDULER_METRICS_TOKEN when one is set: the series
// name every team's jobs, which a team's token must not list. Without it /metrics stays
// open, as Prometheus' default scrape expects (docs/operations.md says when to set it).
func (s *Server) metricsGuard(next http.Handler) http.Handler {
	if s.cfg.MetricsToken == "" {
		return next
	}
	want := sha256.Sum256([]byte(s.cfg.MetricsToken))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		given := bearer(r)
		got := sha256.Sum256([]byte(given))
		if given == "" || subtle.ConstantTimeCompare(got[:], want[:]) != 1 {
			s.refused(r, probUnauthorized)
			w.Header().Set("WWW-Authenticate", `Bearer realm="scheduler-metrics"`)
			detail := `this replica's /metrics needs "Authorization: Bearer <SCHEDULER_METRICS_TOKEN>" (Prometheus: authorization.credentials_file in the scrape config)`
			httpx.WriteProblem(w, r, http.StatusUnauthorized, probUnauthorized, detail, client.FieldError{Field: "Authorization", Detail: detail})
			return
		}
		next.ServeHTTP(w, r)
	})
}

// identify returns the principal of a bearer token; found is false when it names none. The
// error is a lookup that could not finish.
func (s *Server) identify(ctx context.Context, given string) (p access.Principal, found bool, err error) {
	if given == "" {
		return p, false, nil
	}
	h := sha256.Sum256([]byte(given))
	if p, ok := s.env.match(h); ok {
		return p, true, nil
	}
	if s.cfg.OIDC != nil && oidc.LooksLikeJWT(given) {
		return s.cfg.OIDC.Identify(ctx, given)
	}
	return s.stored.lookup(ctx, s.cfg.DB, h)
}

// mayAct guards every route that changes something: a principal that may change nothing
// anywhere (the read-only token, a viewer) gets 403 at once, and so does a cross-site
// browser request (checked by Sec-Fetch-Site and Origin), which matters when no token is
// configured and nothing else would stop a page on another site from posting to a replica
// on loopback. Each route then checks the namespace it acts in (allow, adminOnly).
func (s *Server) mayAct(next http.Handler) http.Handler {
	cop := http.NewCrossOriginProtection()
	cop.SetDenyHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.refused(r, probCrossOrigin)
		httpx.WriteProblem(w, r, http.StatusForbidden, probCrossOrigin,
			"a cross-site browser request may not act on the scheduler; use the dashboard at /ui/ on this host, the scheduler command, or a client that is not a browser")
	}))
	return cop.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if p := principal(r.Context()); !p.MayChangeSomething() {
			s.refused(r, probReadOnly)
			httpx.WriteProblem(w, r, http.StatusForbidden, probReadOnly, fmt.Sprintf(
				"%s may only read: it cannot trigger, cancel, pause, resume, step down, or create, replace or delete jobs; use SCHEDULER_API_TOKEN or a token with the editor or admin role",
				describe(p)))
			return
		}
		next.ServeHTTP(w, r)
	}))
}

// checkHost guards a replica without a token (loopback only): its answers go only to a Host
// that is a loopback address, localhost, or one of SCHEDULER_API_HOSTS. A DNS-rebinding page
// (served from its own name, which then resolves to 127.0.0.1) is same-origin to the
// browser, so the cross-origin check lets it through; its requests still carry its own
// name in Host. With a token, the token is the guard and any Host is answered.
func (s *Server) checkHost(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.env.configured() || s.hostAllowed(r.Host) {
			next.ServeHTTP(w, r)
			return
		}
		s.refused(r, probHostNotAllowed)
		httpx.WriteProblem(w, r, http.StatusForbidden, probHostNotAllowed, fmt.Sprintf(
			"Host %q is not this replica's: without SCHEDULER_API_TOKEN it answers only 127.0.0.1, [::1] and localhost; "+
				"use one of them, add the name to SCHEDULER_API_HOSTS, or set a token", r.Host))
	})
}

// hostAllowed reports whether host (a Host header, with or without port) names this replica.
func (s *Server) hostAllowed(host string) bool {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.ToLower(strings.TrimSuffix(strings.Trim(host, "[]"), "."))
	if host == "localhost" || strings.HasSuffix(host, ".localhost") {
		return true // RFC 6761: always loopback
	}
	if ip := net.ParseIP(host); ip != nil {
		return ip.IsLoopback()
	}
	return slices.Contains(s.cfg.APIHosts, host)
}
