// Package notify is what a job's notifications are: the events a team can ask to hear of
// (a run failed or timed out, a slot was missed, the job recovered or was paused), the rules
// that say where each goes (a signed webhook, or a Slack incoming webhook), their checks, and
// the messages' bodies. It holds no state and imports nothing of the scheduler's, so that the
// configuration of built-in jobs, runtime definitions, the engine that records events and
// the leader's delivery service (internal/notify/deliver) all share one meaning of a rule.
package notify

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
)

// The events, as definitions name them in "on" and the tables store them.
const (
	Failed    = "failed"
	TimedOut  = "timed_out"
	Missed    = "missed"
	Recovered = "recovered" // the first succeeded run after a failed, timed_out or missed one
	Paused    = "paused"    // an operator's pause, or the automatic one after pause_after_failures
)

// All lists the events in the order the documentation gives them.
var All = []string{Failed, TimedOut, Missed, Recovered, Paused}

// MaxRules bounds a job's rules: each is a message per event and interval, and a long list
// is more likely a mistake than a need.
const MaxRules = 5

// maxURL bounds a webhook URL, as http.url is bounded.
const maxURL = 2048

// Rule is one entry of a job's "notify": the events it wants and one destination.
type Rule struct {
	On      []string `json:"on"`
	Webhook *Webhook `json:"webhook,omitempty"`
	Slack   *Slack   `json:"slack,omitempty"`
}

// Webhook is a destination that receives the message's JSON, signed as Standard Webhooks
// sign (webhook-id, webhook-timestamp, webhook-signature) when SigningSecret names a secret.
type Webhook struct {
	URL           string `json:"url"`
	SigningSecret string `json:"signing_secret,omitempty"`
}

// Slack is a Slack incoming webhook. Its URL is itself a credential (anyone holding it may
// post to the channel), so a definition names the secret that holds it.
type Slack struct {
	URLSecret string `json:"url_secret"`
}

// Kinds of destination, as deliveries store them.
const (
	KindWebhook = "webhook"
	KindSlack   = "slack"
)

// Kind is KindWebhook or KindSlack.
func (r Rule) Kind() string {
	if r.Slack != nil {
		return KindSlack
	}
	return KindWebhook
}

// Wants reports whether the rule asks for event.
func (r Rule) Wants(event string) bool { return slices.Contains(r.On, event) }

// Events is the set of events any of a job's rules want, for the engine's quick test at
// every finish: a job without notifications costs no statement.
type Events uint8

// EventsOf is the union of the rules' events.
func EventsOf(rules []Rule) Events {
	var e Events
	for _, r := range rules {
		for _, ev := range r.On {
			if i := slices.Index(All, ev); i >= 0 {
				e |= 1 << i
			}
		}
	}
	return e
}

// Has reports whether event is in the set.
func (e Events) Has(event string) bool {
	i := slices.Index(All, event)
	return i >= 0 && e&(1<<i) != 0
}

// Problem is one wrong field of a job's rules: its path ("notify[0].webhook.url") and what
// to write instead.
type Problem struct {
	Field, Message string
}

// Checker is what a check needs from the scheduler it runs on; a nil function checks nothing.
type Checker struct {
	// CheckURL is the outbound guard's check of a URL (definition.Env.CheckURL).
	CheckURL func(raw string) error
	// HasSecret reports whether the named secret has a value.
	HasSecret func(name string) bool
	// SecretHint says how an operator sets a missing secret (SCHEDULER_SECRET_<NAME>).
	SecretHint func(name string) string
}

var secretRE = regexp.MustCompile(`^[A-Z][A-Z0-9_]{0,62}$`)

// secretNameWant is the grammar of a secret's name, as internal/runtimejob words it.
const secretNameWant = "upper-case letters, digits and _, starting with a letter, at most 63 (e.g. BILLING_TOKEN)"

// Check reports every wrong field of rules at once, under prefix ("notify").
func Check(prefix string, rules []Rule, c Checker) []Problem {
	var ps []Problem
	fail := func(field, format string, args ...any) {
		ps = append(ps, Problem{Field: field, Message: fmt.Sprintf(format, args...)})
	}
	if len(rules) > MaxRules {
		fail(prefix, "%d rules; at most %d (one rule may name several events)", len(rules), MaxRules)
	}
	for i, r := range rules {
		at := fmt.Sprintf("%s[%d]", prefix, i)
		if len(r.On) == 0 {
			fail(at+".on", "required: the events to hear of, among %s", strings.Join(All, ", "))
		}
		for j, ev := range r.On {
			switch {
			case !slices.Contains(All, ev):
				fail(fmt.Sprintf("%s.on[%d]", at, j), "%q is not an event: want one of %s", ev, strings.Join(All, ", "))
			case slices.Index(r.On, ev) < j:
				fail(fmt.Sprintf("%s.on[%d]", at, j), "%q is listed twice", ev)
			}
		}
		switch {
		case (r.Webhook == nil) == (r.Slack == nil):
			fail(at, `a rule has exactly one destination: {"webhook": {"url": "https://..."}} or {"slack": {"url_secret": "NAME"}}`)
		case r.Webhook != nil:
			checkWebhook(at+".webhook", *r.Webhook, c, fail)
		default:
			checkSecret(at+".slack.url_secret", r.Slack.URLSecret, c, fail)
		}
	}
	return ps
}

func checkWebhook(at string, w Webhook, c Checker, fail func(string, string, ...any)) {
	switch {
	case w.URL == "":
		fail(at+".url", "required: the URL that receives the notifications, e.g. https://alerts.example.com/scheduler")
	case len(w.URL) > maxURL:
		fail(at+".url", "%d bytes; at most %d", len(w.URL), maxURL)
	case strings.IndexFunc(w.URL, func(r rune) bool { return r < 0x20 || r == 0x7f }) >= 0:
		fail(at+".url", "holds a control character; write the URL on one line, percent-encoding what needs it")
	case c.CheckURL != nil:
		if err := c.CheckURL(w.URL); err != nil {
			fail(at+".url", "%v", err)
		}
	}
	if w.SigningSecret != "" {
		checkSecret(at+".signing_secret", w.SigningSecret, c, fail)
	}
}

func checkSecret(field, name string, c Checker, fail func(string, string, ...any)) {
	switch {
	case name == "":
		fail(field, "required: the name of the secret that holds the URL, e.g. TEAM_SLACK_WEBHOOK")
	case !secretRE.MatchString(name):
		fail(field, "%q is not a secret name: want %s", name, secretNameWant)
	case c.HasSecret != nil && !c.HasSecret(name):
		hint := ""
		if c.SecretHint != nil {
			hint = ": " + c.SecretHint(name)
		}
		fail(field, "secret %s is not set%s", name, hint)
	}
}

// Secrets lists the secret names rules use.
func Secrets(rules []Rule) []string {
	var names []string
	for _, r := range rules {
		switch {
		case r.Slack != nil && r.Slack.URLSecret != "":
			names = append(names, r.Slack.URLSecret)
		case r.Webhook != nil && r.Webhook.SigningSecret != "":
			names = append(names, r.Webhook.SigningSecret)
		}
	}
	return names
}
