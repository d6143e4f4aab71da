package runtimejob

import (
	"fmt"
	"net"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/schedulerhq/scheduler/internal/namespace"
	"github.com/schedulerhq/scheduler/internal/secrets/allowedhosts"
)

// An HTTP job's checks: the call (method, URL through the outbound guard, headers the
// scheduler reserves, body), its auth and signing secrets, and its retry policy.

func (c *checker) http(j *Checked) {
	h := *j.Def.HTTP
	j.Def.HTTP = &h
	if h.Method == "" {
		h.Method = MethodDefault
	}
	if !slices.Contains(methods, h.Method) {
		c.fail("http.method", "%q is not supported: want one of %s", h.Method, strings.Join(methods, ", "))
	}
	switch {
	case h.URL == "":
		c.fail("http.url", "required: the URL to call, e.g. https://billing.internal/reports/daily")
	case len(h.URL) > maxURL:
		c.fail("http.url", "%d bytes; at most %d", len(h.URL), maxURL)
	case strings.IndexFunc(h.URL, func(r rune) bool { return r < 0x20 || r == 0x7f }) >= 0:
		c.fail("http.url", "holds a control character; write the URL on one line, percent-encoding what needs it")
	case c.env.CheckURL != nil:
		if err := c.env.CheckURL(h.URL); err != nil {
			c.fail("http.url", "%v", err)
		}
	}
	if len(h.Headers) > maxHeaders {
		c.fail("http.headers", "%d headers; at most %d", len(h.Headers), maxHeaders)
	}
	for _, name := range sortedKeys(h.Headers) {
		c.header("http.headers."+name, name, h.Headers[name], h.Auth != nil)
	}
	if len(h.Body) > MaxBody {
		c.fail("http.body", "%d bytes; at most %d (64 KiB)", len(h.Body), MaxBody)
	} else if !utf8.ValidString(h.Body) || strings.ContainsRune(h.Body, 0) {
		c.fail("http.body", "must be UTF-8 text without NUL characters (PostgreSQL cannot store them)")
	}
	j.AttemptTimeout = c.duration("http.timeout", h.Timeout, min(AttemptTimeoutDefault, j.Timeout), time.Second, maxTimeout)
	if j.AttemptTimeout > j.Timeout && j.Timeout > 0 {
		c.fail("http.timeout", "%s is above the job's timeout (%s), which bounds every attempt together", short(j.AttemptTimeout), short(j.Timeout))
	}
	h.Timeout = short(j.AttemptTimeout)
	if len(h.Success) > maxSuccessStatuses {
		c.fail("http.success", "%d statuses; at most %d", len(h.Success), maxSuccessStatuses)
	}
	for _, code := range h.Success {
		if code < 100 || code > 599 {
			c.fail("http.success", "%d is not an HTTP status (100 to 599)", code)
		}
	}
	ns := namespace.Of(j.Def.Key())
	if a := h.Auth; a != nil {
		switch {
		case a.OIDC != nil && (a.BearerSecret != "" || a.Header != "" || a.HeaderSecret != ""):
			c.fail("http.auth", "one of oidc, bearer_secret, or header with header_secret: each sets Authorization or authenticates alone")
		case a.OIDC != nil:
			c.oidc(a.OIDC)
		case a.BearerSecret != "" && (a.Header != "" || a.HeaderSecret != ""):
			c.fail("http.auth", "either bearer_secret, or header with header_secret, not both")
		case a.BearerSecret != "":
			c.secret("http.auth.bearer_secret", ns, a.BearerSecret, h.URL)
		case a.Header != "" && a.HeaderSecret != "":
			c.header("http.auth.header", a.Header, "", false)
			c.secret("http.auth.header_secret", ns, a.HeaderSecret, h.URL)
		default:
			c.fail("http.auth", `name a secret: {"bearer_secret": "NAME"} or {"header": "X-Api-Key", "header_secret": "NAME"}, or ask for a token: {"oidc": {"audience": "billing"}}`)
		}
	}
	if h.SigningSecret != "" {
		// A signing secret too: a receiver trusts its HMACs, so signing a body for another
		// host makes the scheduler a signing oracle for whoever runs it.
		c.secret("http.signing_secret", ns, h.SigningSecret, h.URL)
	}
	c.completion(j, &h)
	j.Retry = c.retry(j.Def.Retry)
	j.Def.Retry = &Retry{MaxAttempts: j.Retry.MaxAttempts,
		InitialBackoff: short(j.Retry.InitialBackoff), MaxBackoff: short(j.Retry.MaxBackoff)}
}

// oidc checks an OIDC token's request: an audience a verifier can compare (printable ASCII,
// no space, bounded), and a scheduler that can sign.
func (c *checker) oidc(o *OIDCAuth) {
	switch {
	case o.Audience == "":
		c.fail("http.auth.oidc.audience", "required: the aud the target's verifier expects, e.g. billing or https://billing.internal")
	case len(o.Audience) > MaxAudience:
		c.fail("http.auth.oidc.audience", "%d bytes; at most %d", len(o.Audience), MaxAudience)
	case strings.IndexFunc(o.Audience, func(r rune) bool { return r <= ' ' || r > '~' }) >= 0:
		c.fail("http.auth.oidc.audience", "printable ASCII without spaces, as the target's verifier compares it byte for byte, e.g. billing or https://billing.internal")
	}
	if c.env.TokenSigning != nil {
		if err := c.env.TokenSigning(); err != nil {
			c.fail("http.auth.oidc", "%v", err)
		}
	}
}

// header checks one header a definition sets; withAuth says an auth block sets
// Authorization, so the definition may not set it too.
func (c *checker) header(field, name, value string, withAuth bool) {
	lower := strings.ToLower(name)
	switch {
	case !ValidHeaderName(name):
		c.fail(field, "%s", HeaderNameWant)
	case slices.Contains(ReservedHeaders, lower) || strings.HasPrefix(lower, "x-scheduler-"):
		c.fail(field, "%s %s", name, headerReservedMessage)
	case withAuth && lower == "authorization":
		c.fail(field, "Authorization comes from http.auth (its secret or its OIDC token); remove one of the two")
	}
	if len(value) > maxHeaderValue {
		c.fail(field, "the value has %d bytes; at most %d", len(value), maxHeaderValue)
	} else if p := HeaderValueProblem(value); p != "" {
		c.fail(field, "%s", p)
	}
}

// HeaderNameWant says what a header name is, for the message that refuses one.
var HeaderNameWant = fmt.Sprintf("not a header name: want an RFC 9110 token of at most %d characters: letters, digits and !#$%%&'*+-.^_`|~ (e.g. X-Request-Source)", maxHeaderName)

// ValidHeaderName reports a header name a call can carry: an RFC 9110 token, not too long.
func ValidHeaderName(name string) bool {
	return name != "" && len(name) <= maxHeaderName && isToken(name)
}

// HeaderValueProblem says what keeps value from being a header's value, or "". RFC 9110's
// field value is visible characters, spaces and tabs; Go's client refuses a request with
// any other control character, so a job holding one would fail every attempt, and
// PostgreSQL stores no NUL.
func HeaderValueProblem(value string) string {
	if !utf8.ValidString(value) {
		return "a header value is UTF-8 text"
	}
	for i, r := range value {
		if r < ' ' && r != '\t' || r == 0x7f {
			return fmt.Sprintf("a header value is one line of visible characters, spaces and tabs; it holds the control character %U at byte %d: remove it", r, i)
		}
	}
	return ""
}

// secret checks a secret the job of namespace ns names, and that it may be sent to the
// host of rawURL.
func (c *checker) secret(field, ns, name, rawURL string) {
	if !secretRE.MatchString(name) {
		c.fail(field, "%q is not a secret name: want %s", name, secretNameWant)
		return
	}
	if c.env.Secret == nil || !namespace.Valid(ns) {
		return // nothing to look in, or a namespace already reported wrong
	}
	hosts, ok := c.env.Secret(ns, name)
	if !ok {
		c.fail(field, "%s", SecretMissing(ns, name))
		return
	}
	host, port, err := allowedhosts.FromURL(rawURL)
	if hosts == nil || err != nil || host == "" {
		return // any host; or a URL already reported wrong
	}
	if !allowedhosts.Match(hosts, host, port) {
		c.fail(field, "%s", SecretHostRefused(ns, name, net.JoinHostPort(host, port), allowedhosts.Describe(hosts)))
	}
}

func (c *checker) retry(r *Retry) RetryPolicy {
	p := RetryPolicy{MaxAttempts: MaxAttemptsDefault, InitialBackoff: InitialBackoffDefault, MaxBackoff: MaxBackoffDefault}
	if r == nil {
		return p
	}
	if r.MaxAttempts < 1 || r.MaxAttempts > maxAttempts {
		c.fail("retry.max_attempts", "%d is out of range: want 1 (no retry) to %d", r.MaxAttempts, maxAttempts)
	} else {
		p.MaxAttempts = r.MaxAttempts
	}
	p.InitialBackoff = c.duration("retry.initial_backoff", r.InitialBackoff, InitialBackoffDefault, minBackoff, maxBackoff)
	p.MaxBackoff = c.duration("retry.max_backoff", r.MaxBackoff, max(MaxBackoffDefault, p.InitialBackoff), minBackoff, maxBackoff)
	if p.MaxBackoff < p.InitialBackoff {
		c.fail("retry.max_backoff", "%s is below initial_backoff (%s)", short(p.MaxBackoff), short(p.InitialBackoff))
	}
	return p
}

// isToken reports an RFC 9110 token, the grammar of a header name.
func isToken(s string) bool {
	for _, r := range s {
		if r > 127 || !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("!#$%&'*+-.^_`|~", r)) {
			return false
		}
	}
	return true
}

// completion checks how an HTTP job's run ends: by the answer (the default, "response"), or
// by the target's callback, whose heartbeats must come within heartbeat_timeout.
func (c *checker) completion(j *Checked, h *HTTPTarget) {
	switch h.Completion {
	case "", CompletionResponse:
		// Written as left out, so every definition from before callbacks keeps its normal
		// form (and its version when applied again).
		h.Completion = ""
	case CompletionCallback:
	default:
		c.fail("http.completion", "%q is not a completion mode: want %q (the answer ends the run) or %q (the target posts the outcome to the run's callback URL)",
			h.Completion, CompletionResponse, CompletionCallback)
		return
	}
	if h.Completion != CompletionCallback {
		if h.HeartbeatTimeout != "" {
			c.fail("http.heartbeat_timeout", "only a callback job has heartbeats: set \"completion\": %q, or remove heartbeat_timeout", CompletionCallback)
		}
		return
	}
	j.HeartbeatTimeout = c.duration("http.heartbeat_timeout", h.HeartbeatTimeout, min(HeartbeatTimeoutDefault, j.Timeout), time.Second, maxTimeout)
	if j.HeartbeatTimeout > j.Timeout && j.Timeout > 0 {
		c.fail("http.heartbeat_timeout", "%s is above the job's timeout (%s), which ends the run whatever its heartbeats", short(j.HeartbeatTimeout), short(j.Timeout))
	}
	h.HeartbeatTimeout = short(j.HeartbeatTimeout)
}
