package api

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"net/http"
	"strings"
)

// Token kinds, as the audit log records them. A read token never acts, so it is never
// recorded; "none" is a replica with no token configured (loopback only).
const (
	tokenFull     = "full"
	tokenFullNext = "full-next"
	tokenRead     = "read"
	tokenNone     = "none"
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
		writeProblem(w, r, http.StatusForbidden, probCrossOrigin,
			"a cross-site browser request may not act on the scheduler; use the dashboard at /ui/ on this host, the scheduler command, or a client that is not a browser")
	}))
	return cop.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if tokenKind(r.Context()) == tokenRead {
			writeProblem(w, r, http.StatusForbidden, probReadOnly,
				"the read-only token (SCHEDULER_API_READ_TOKEN) cannot trigger, cancel, pause, resume or step down; use SCHEDULER_API_TOKEN")
			return
		}
		next.ServeHTTP(w, r)
	}))
}
