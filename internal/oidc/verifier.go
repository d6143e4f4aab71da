// Package oidc signs callers in with a JWT from an OpenID Connect issuer, such as a
// Kubernetes projected service-account token, and maps its subject to the roles that
// SCHEDULER_OIDC_BINDINGS grants.
//
// Discovery, the cached key set refreshed on an unknown key id, and the checks of the
// signature, issuer, audience, expiry and not-before are github.com/coreos/go-oidc's; this
// package adds what the scheduler needs around them: a verifier that starts without the
// issuer, errors that tell a bad token (401) from an issuer that cannot be reached (503),
// a bound on how often a token can make the keys be fetched again, and the bindings.
package oidc

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	gooidc "github.com/coreos/go-oidc/v3/oidc"

	"github.com/schedulerhq/scheduler/internal/config"
)

// The kinds of Verify's errors; tell them apart with errors.Is.
var (
	// ErrUnauthorized is a token that signs no one in: malformed, badly signed, expired,
	// for another issuer or audience, or for a subject no binding names. Answer 401.
	ErrUnauthorized = errors.New("OIDC token refused")
	// ErrUnavailable is a token that could not be checked because the issuer's discovery
	// document or keys could not be fetched. Answer 503: the same token may pass later.
	ErrUnavailable = errors.New("OIDC issuer unavailable")
)

// signingAlgs are the algorithms accepted. Both are asymmetric, so that no key the issuer
// publishes can be used as an HMAC secret, and they are what Kubernetes and common issuers
// sign with.
var signingAlgs = []string{gooidc.RS256, gooidc.ES256}

const (
	// maxTokenBytes bounds the token Verify parses. Service-account tokens are 1-2 KB;
	// tokens with many group claims reach a few more.
	maxTokenBytes = 32 << 10
	// clockSkew is how far in the future a token's iat may be, the same leeway go-oidc
	// gives its nbf (it does not check iat).
	clockSkew = 5 * time.Minute
	// maxReasonBytes bounds the text an error takes from go-oidc, which may quote claims
	// of the token, so that a crafted token cannot flood the log.
	maxReasonBytes = 300
)

// Identity is who a verified token signs in, and what it may do.
type Identity struct {
	Subject string  // the token's sub
	Grants  []Grant // of every binding that matches Subject, in binding order; never empty
}

// Verifier checks tokens of one issuer. It is safe for concurrent use.
type Verifier struct {
	issuer   string
	audience string
	bindings []config.OIDCBinding
	log      *slog.Logger

	discoveryClient *http.Client
	keysClient      *http.Client
	keysTransport   *documentTransport

	mu       sync.Mutex
	verifier *gooidc.IDTokenVerifier // nil until the key set's URL is known
	pending  *discovery              // the discovery in flight, if any
}

// discovery is one attempt to read the issuer's discovery document, which every Verify
// that arrives meanwhile waits for rather than starting its own.
type discovery struct {
	done     chan struct{} // closed once verifier or err is set
	verifier *gooidc.IDTokenVerifier
	err      error
}

// New returns a verifier for cfg, or nil when cfg has no issuer (sign-in with OIDC off).
// cfg is expected to have passed config's checks. New contacts no one: a replica starts
// while the issuer is down, and the discovery document (unless cfg.JWKSURL is set) and
// keys are fetched on first use, and again on later calls while that fails. Requests go
// through httpClient's transport (http.DefaultTransport when httpClient or its Transport is
// nil), each bounded by fetchTimeout; logger nil logs nothing.
func New(cfg config.OIDC, httpClient *http.Client, logger *slog.Logger) *Verifier {
	if cfg.Issuer == "" {
		return nil
	}
	if httpClient == nil {
		httpClient = &http.Client{}
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	base := httpClient.Transport
	if base == nil {
		base = http.DefaultTransport
	}
	keys := &documentTransport{base: base, log: logger, keySet: true, refreshInterval: keyRefreshIntervalDefault}
	v := &Verifier{
		issuer:          cfg.Issuer,
		audience:        cfg.Audience,
		bindings:        slices.Clone(cfg.Bindings),
		log:             logger,
		discoveryClient: withTransport(httpClient, &documentTransport{base: base, log: logger}),
		keysClient:      withTransport(httpClient, keys),
		keysTransport:   keys,
	}
	if cfg.JWKSURL != "" {
		v.verifier = v.newTokenVerifier(cfg.JWKSURL)
	}
	return v
}

// newTokenVerifier builds go-oidc's verifier on the key set at jwksURL. It fetches nothing:
// the key set is fetched when a token first needs it.
func (v *Verifier) newTokenVerifier(jwksURL string) *gooidc.IDTokenVerifier {
	// go-oidc takes the key set's HTTP client from this context, and ignores its end.
	remote := gooidc.NewRemoteKeySet(gooidc.ClientContext(context.Background(), v.keysClient), jwksURL)
	return gooidc.NewVerifier(v.issuer, keySet{remote: remote}, &gooidc.Config{
		ClientID:             v.audience,
		SupportedSigningAlgs: signingAlgs,
	})
}

// Verify checks rawJWT and returns whom it signs in. An error is of the kind ErrUnauthorized
// or ErrUnavailable, says why in words an operator can act on, and never holds the token.
func (v *Verifier) Verify(ctx context.Context, rawJWT string) (Identity, error) {
	if v == nil {
		return Identity{}, refused("sign-in with OIDC tokens is not configured (SCHEDULER_OIDC_ISSUER is not set)")
	}
	if len(rawJWT) > maxTokenBytes {
		return Identity{}, refused(fmt.Sprintf("the token is %d bytes long, more than the %d accepted", len(rawJWT), maxTokenBytes))
	}
	// go-oidc refuses these too; checking first names the reason plainly and spares a
	// key fetch for a token that cannot pass.
	h, err := parseHeader(rawJWT)
	if err != nil {
		return Identity{}, refused("it is not a signed JWT: " + err.Error())
	}
	if !slices.Contains(signingAlgs, h.Alg) {
		return Identity{}, refused(fmt.Sprintf("it is signed with algorithm %s; only RS256 and ES256 are accepted", clip(fmt.Sprintf("%q", h.Alg))))
	}

	tokenVerifier, err := v.tokenVerifier(ctx)
	if err != nil {
		return Identity{}, err
	}
	var keySetErr error
	token, err := tokenVerifier.Verify(context.WithValue(ctx, keySetErrorKey{}, &keySetErr), rawJWT)
	if err != nil {
		return Identity{}, v.explain(err, keySetErr, h.Kid)
	}
	if token.IssuedAt.After(time.Now().Add(clockSkew)) {
		return Identity{}, refused(fmt.Sprintf("it was issued in the future (iat %s)", token.IssuedAt.UTC().Format(time.RFC3339)))
	}
	if token.Subject == "" {
		return Identity{}, refused("it has no subject (sub)")
	}
	grants := grantsFor(v.bindings, token.Subject)
	if len(grants) == 0 {
		return Identity{}, refused(fmt.Sprintf("subject %s matches no binding in SCHEDULER_OIDC_BINDINGS", clip(fmt.Sprintf("%q", token.Subject))))
	}
	return Identity{Subject: token.Subject, Grants: grants}, nil
}

// explain turns go-oidc's refusal of a token into an error of one of the two kinds.
// keySetErr is the key set's own error, when the signature step failed.
func (v *Verifier) explain(err, keySetErr error, kid string) error {
	key := "no key id"
	if kid != "" {
		key = "key id " + clip(fmt.Sprintf("%q", kid))
	}
	var fetchErr *url.Error
	var expired *gooidc.TokenExpiredError
	switch {
	case keySetErr == nil && errors.As(err, &expired) && expired.Expiry.IsZero():
		return refused("it has no expiry (exp)")
	case keySetErr == nil && errors.As(err, &expired):
		return refused("it expired at " + expired.Expiry.UTC().Format(time.RFC3339))
	case keySetErr == nil:
		// Issuer, audience, not-before or a malformed part: go-oidc's text says which.
		return refused(clip(trimLibraryPrefix(err.Error())))
	case errors.As(keySetErr, &fetchErr):
		return &verifyError{kind: ErrUnavailable, reason: fmt.Sprintf("cannot fetch the issuer's keys from %s: %s", fetchErr.URL, clip(fetchErr.Err.Error())), cause: fetchErr}
	case errors.Is(keySetErr, context.Canceled) || errors.Is(keySetErr, context.DeadlineExceeded):
		return &verifyError{kind: ErrUnavailable, reason: "the request ended while the issuer's keys were being fetched", cause: keySetErr}
	default:
		return refused(fmt.Sprintf("its signature does not verify with any of the issuer's keys (the token names %s): "+
			"another issuer or key signed it, or it was altered", key))
	}
}

// tokenVerifier returns go-oidc's verifier, discovering the issuer first if that has not
// yet succeeded.
func (v *Verifier) tokenVerifier(ctx context.Context) (*gooidc.IDTokenVerifier, error) {
	v.mu.Lock()
	if v.verifier != nil {
		defer v.mu.Unlock()
		return v.verifier, nil
	}
	d := v.pending
	if d == nil {
		d = &discovery{done: make(chan struct{})}
		v.pending = d
		// Run apart from this caller, so that its leaving does not fail the others waiting.
		go v.discover(d)
	}
	v.mu.Unlock()
	select {
	case <-d.done:
		return d.verifier, d.err
	case <-ctx.Done():
		return nil, &verifyError{kind: ErrUnavailable, reason: "the request ended while the issuer's discovery document was being fetched", cause: ctx.Err()}
	}
}

// discover reads the discovery document into d; a failure leaves the next Verify to try again.
func (v *Verifier) discover(d *discovery) {
	ctx, cancel := context.WithTimeout(gooidc.ClientContext(context.Background(), v.discoveryClient), fetchTimeout)
	defer cancel()
	d.verifier, d.err = v.discoverVerifier(ctx)
	if d.err != nil {
		v.log.Warn("oidc: issuer discovery failed; the next token will try again", "issuer", v.issuer, "error", d.err)
	}
	v.mu.Lock()
	v.verifier, v.pending = d.verifier, nil
	v.mu.Unlock()
	close(d.done)
}

func (v *Verifier) discoverVerifier(ctx context.Context) (*gooidc.IDTokenVerifier, error) {
	wellKnown := strings.TrimSuffix(v.issuer, "/") + "/.well-known/openid-configuration" // as go-oidc builds it
	provider, err := gooidc.NewProvider(ctx, v.issuer)
	if err != nil {
		var fetchErr *url.Error
		var mismatch *gooidc.IssuerMismatchError
		if errors.As(err, &mismatch) {
			return nil, &verifyError{kind: ErrUnavailable, cause: err, reason: fmt.Sprintf(
				"the discovery document names the issuer %s, not %q: set SCHEDULER_OIDC_ISSUER to the issuer exactly as its tokens name it",
				clip(fmt.Sprintf("%q", mismatch.Discovered)), v.issuer)}
		}
		reason := err.Error()
		if errors.As(err, &fetchErr) {
			reason = fetchErr.Err.Error() // without the URL, which the message names already
		}
		return nil, &verifyError{kind: ErrUnavailable, reason: "cannot fetch the discovery document " + wellKnown + ": " + clip(reason), cause: err}
	}
	var doc struct {
		JWKSURI string `json:"jwks_uri"`
	}
	if err := provider.Claims(&doc); err != nil || doc.JWKSURI == "" {
		return nil, &verifyError{kind: ErrUnavailable, reason: "the discovery document " + wellKnown + " has no jwks_uri"}
	}
	if u, err := url.Parse(doc.JWKSURI); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return nil, &verifyError{kind: ErrUnavailable, reason: "the discovery document " + wellKnown + " has a jwks_uri that is not an http(s) URL"}
	}
	v.log.Info("oidc: issuer discovered", "issuer", v.issuer, "jwks_uri", doc.JWKSURI)
	return v.newTokenVerifier(doc.JWKSURI), nil
}

// verifyError is an error of Verify: its message is the kind and the reason.
type verifyError struct {
	kind   error // ErrUnauthorized or ErrUnavailable
	reason string
	cause  error // what go-oidc or the transport returned, if anything
}

func (e *verifyError) Error() string { return e.kind.Error() + ": " + e.reason }

// Unwrap makes errors.Is find the kind, and the cause (context.Canceled, say).
func (e *verifyError) Unwrap() []error {
	if e.cause == nil {
		return []error{e.kind}
	}
	return []error{e.kind, e.cause}
}

func refused(reason string) error { return &verifyError{kind: ErrUnauthorized, reason: reason} }

// trimLibraryPrefix drops go-oidc's "oidc: " from a message that follows our own prefix.
func trimLibraryPrefix(s string) string { return strings.TrimPrefix(s, "oidc: ") }

// clip shortens s to maxReasonBytes, on a rune boundary.
func clip(s string) string {
	if len(s) <= maxReasonBytes {
		return s
	}
	cut := maxReasonBytes
	for cut > 0 && s[cut]&0xC0 == 0x80 {
		cut--
	}
	return s[:cut] + "…"
}
