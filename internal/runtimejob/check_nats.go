package runtimejob

import (
	"net/url"
	"strings"
	"unicode/utf8"

	"github.com/schedulerhq/scheduler/internal/namespace"
)

// A NATS job's checks: its server (a URL the outbound guard allows, or a secret holding
// one), its subject, its body and its retry policy.

// maxSubject bounds a NATS subject; the server allows longer, no stream needs them.
const maxSubject = 256

func (c *checker) nats(j *Checked) {
	n := *j.Def.NATS
	j.Def.NATS = &n
	switch {
	case n.URL != "" && n.URLSecret != "":
		c.fail("nats.url", "either url or url_secret, not both: a URL with credentials goes whole into a secret")
	case n.URLSecret != "":
		c.secret("nats.url_secret", namespace.Of(j.Def.Key()), n.URLSecret, "")
	case n.URL == "":
		c.fail("nats.url", "required: the NATS server, e.g. nats://nats.internal:4222, or url_secret naming a secret that holds the URL with its credentials")
	case len(n.URL) > maxURL:
		c.fail("nats.url", "%d bytes; at most %d", len(n.URL), maxURL)
	case strings.IndexFunc(n.URL, func(r rune) bool { return r < 0x20 || r == 0x7f }) >= 0:
		c.fail("nats.url", "holds a control character; write the URL on one line")
	case hasUserinfo(n.URL):
		// Checked without the guard too: a stored definition must never show a password.
		c.fail("nats.url", "must not contain credentials (user:password@ or token@): store the whole URL in a secret and name it in url_secret")
	case c.env.CheckNATSURL != nil:
		if err := c.env.CheckNATSURL(n.URL); err != nil {
			c.fail("nats.url", "%v", err)
		}
	}
	if p := SubjectProblem(n.Subject); p != "" {
		c.fail("nats.subject", "%s", p)
	}
	if len(n.Body) > MaxBody {
		c.fail("nats.body", "%d bytes; at most %d (64 KiB)", len(n.Body), MaxBody)
	} else if !utf8.ValidString(n.Body) || strings.ContainsRune(n.Body, 0) {
		c.fail("nats.body", "must be UTF-8 text without NUL characters (PostgreSQL cannot store them)")
	}
	j.AttemptTimeout = min(AttemptTimeoutDefault, j.Timeout)
	j.Retry = c.retry(j.Def.Retry)
	j.Def.Retry = &Retry{MaxAttempts: j.Retry.MaxAttempts,
		InitialBackoff: short(j.Retry.InitialBackoff), MaxBackoff: short(j.Retry.MaxBackoff)}
}

// SubjectProblem says what keeps s from being a subject a NATS job may publish to, or "".
// A wildcard publishes nowhere; the subjects starting with $ are the server's and
// JetStream's own API ($JS.API.STREAM.DELETE..., $SYS...), through which a job holding an
// operator's credentials could manage streams or the server; _INBOX subjects are other
// clients' replies, which a job must not answer.
func SubjectProblem(s string) string {
	switch {
	case s == "":
		return "required: the subject a stream captures, e.g. orders.daily-report"
	case len(s) > maxSubject:
		return "at most 256 bytes"
	case strings.HasPrefix(s, "$"):
		return "subjects starting with $ are the server's and JetStream's own API: publish to your stream's subject, e.g. orders.daily-report"
	case strings.HasPrefix(s, "_INBOX."):
		return "_INBOX subjects are other clients' replies: publish to your stream's subject, e.g. orders.daily-report"
	}
	for tok := range strings.SplitSeq(s, ".") {
		switch {
		case tok == "":
			return "an empty token (two dots, or a dot at an end): write tokens separated by single dots, e.g. orders.daily-report"
		case tok == "*" || tok == ">" || strings.ContainsAny(tok, "*>"):
			return "holds a wildcard (* or >): a message is published to one literal subject"
		case strings.IndexFunc(tok, func(r rune) bool { return r <= ' ' || r > '~' }) >= 0:
			return "printable ASCII without spaces, tokens separated by dots, e.g. orders.daily-report"
		}
	}
	return ""
}

// hasUserinfo reports a URL that carries user:password@ or token@.
func hasUserinfo(raw string) bool {
	u, err := url.Parse(raw)
	return err == nil && u.User != nil || err != nil && strings.Contains(raw, "@")
}
