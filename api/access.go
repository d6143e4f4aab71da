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
)

// Token kinds, as the audit log records them. A read token never acts, so it is recorded
// only when refused; "none" is a replica with no token configured (loopback only), or a
// refused request that sent none; "invalid" a refused request whose token matched none.
const (
	tokenFull     = "full"
	tokenFullNext = "full-next"
	tokenRead     = "read"
	tokenNone     = "none"
	tokenInvalid  = "invalid"
)

type tokenKindKey struct{}

// tokenKind returns the kind of token the request was authenticated with.
func tokenKind(ctx context.Context) string {
	k, _ := ctx.Value(tokenKindKey{}).(string)
	return k
}

// accessTokens are the configured tokens, hashed so the constant-time comparison does not
// leak a token's length either.
type accessTokens struct {
	kinds  []string
	hashes [][sha256.Size]byte
}

func newAccessTokens(full, next, read string) accessTokens {
	var a accessTokens
	for _, t := range []struct{ kind, token string }{{tokenFull, full}, {tokenFullNext, next}, {tokenRead, read}} {
		if t.token != "" {
			a.kinds = append(a.kinds, t.kind)
			a.hashes = append(a.hashes, sha256.Sum256([]byte(t.token)))
		}
	}
	return a
}

// match returns the kind of the token given, or "". Every configured token is compared, so
// the time taken does not say which one matched.
func (a accessTokens) match(given string) string {
	h := sha256.Sum256([]byte(given))
	kind := ""
	for i := range a.hashes {
		if subtle.ConstantTimeCompare(h[:], a.hashes[i][:]) == 1 {
			kind = a.kinds[i]
		}
	}
	return kind
}

// authenticate requires one of the bearer tokens on /v1 when a token is configured:
// SCHEDULER_API_TOKEN, SCHEDULER_API_TOKEN_NEXT (so a rotation has no 401 window) or the
// read-only SCHEDULER_API_READ_TOKEN. Tokens travel only in the Authorization header, never
// in a cookie, so a page on another site cannot make a browser send one.
func (s *Server) authenticate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if len(s.tokens.kinds) == 0 {
			next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), tokenKindKey{}, tokenNone)))
			return
		}
		const prefix = "Bearer "
		h := r.Header.Get("Authorization")
		given := ""
		if len(h) > len(prefix) && strings.EqualFold(h[:len(prefix)], prefix) {
			given = h[len(prefix):]
		}
		kind := s.tokens.match(given)
		if given == "" || kind == "" {
			s.refused(r, probUnauthorized)
			w.Header().Set("WWW-Authenticate", `Bearer realm="scheduler"`)
			detail := "send the API token (SCHEDULER_API_TOKEN) as \"Authorization: Bearer <token>\""
			if h != "" {
				detail = "the bearer token is wrong; " + detail
			}
			writeProblem(w, r, http.StatusUnauthorized, probUnauthorized, detail, FieldError{Field: "Authorization", Detail: detail})
			return
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), tokenKindKey{}, kind)))
	})
}

// mayAct guards every route that changes something: the read-only token gets 403, and so
// does a cross-site browser request (checked by Sec-Fetch-Site and Origin), which matters
// when no token is configured and nothing else would stop a page on another site from
// posting to a replica on loopback.
func (s *Server) mayAct(next http.Handler) http.Handler {
	cop := http.NewCrossOriginProtection()
	cop.SetDenyHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.refused(r, probCrossOrigin)
		writeProblem(w, r, http.StatusForbidden, probCrossOrigin,
			"a cross-site browser request may not act on the scheduler; use the dashboard at /ui/ on this host, the scheduler command, or a client that is not a browser")
	}))
	return cop.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if tokenKind(r.Context()) == tokenRead {
			s.refused(r, probReadOnly)
			writeProblem(w, r, http.StatusForbidden, probReadOnly,
				"the read-only token (SCHEDULER_API_READ_TOKEN) cannot trigger, cancel, pause, resume, step down, or create, replace or delete jobs; use SCHEDULER_API_TOKEN")
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
		if len(s.tokens.kinds) > 0 || s.hostAllowed(r.Host) {
			next.ServeHTTP(w, r)
			return
		}
		s.refused(r, probHostNotAllowed)
		writeProblem(w, r, http.StatusForbidden, probHostNotAllowed, fmt.Sprintf(
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
