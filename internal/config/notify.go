package config

import (
	"net/url"
	"strings"
	"time"

	"github.com/schedulerhq/scheduler/internal/notify"
)

// Notifications are the service-wide settings of the jobs' notifications (internal/notify).
type Notifications struct {
	// PublicURL is where people reach the dashboard (SCHEDULER_PUBLIC_URL): a message's
	// console_url starts with it.
	PublicURL string
	// Interval coalesces a storm (SCHEDULER_NOTIFY_INTERVAL): the events of one job and type
	// are gathered for this long, then sent as one message listing them all.
	Interval time.Duration
}

// NotifyIntervalDefault is SCHEDULER_NOTIFY_INTERVAL's default: a minute of a job failing
// every second is one message per destination, not sixty.
const NotifyIntervalDefault = time.Minute

// The built-in jobs' notifications, SCHEDULER_JOB_<NAME>_NOTIFY_*: a webhook (URL, events,
// signing secret) and a Slack incoming webhook whose URL a secret holds. Both hear of the
// events NOTIFY_ON names.
const (
	notifyURLSuffix           = "NOTIFY_URL"
	notifyOnSuffix            = "NOTIFY_ON"
	notifySigningSecretSuffix = "NOTIFY_SIGNING_SECRET"
	notifySlackSecretSuffix   = "NOTIFY_SLACK_URL_SECRET"
)

var notifySuffixes = []string{notifyURLSuffix, notifyOnSuffix, notifySigningSecretSuffix, notifySlackSecretSuffix}

// loadNotifications reads SCHEDULER_PUBLIC_URL and SCHEDULER_NOTIFY_INTERVAL.
func loadNotifications(env *Env, httpAddr string) Notifications {
	n := Notifications{
		PublicURL: strings.TrimRight(env.String("SCHEDULER_PUBLIC_URL", "http://"+httpAddr), "/"),
		Interval:  env.Duration("SCHEDULER_NOTIFY_INTERVAL", NotifyIntervalDefault),
	}
	// The default comes from SCHEDULER_HTTP_ADDR, whose problem is reported as its own.
	_, set := env.lookup("SCHEDULER_PUBLIC_URL")
	if u, err := url.Parse(n.PublicURL); set && (err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "") {
		env.Fail("SCHEDULER_PUBLIC_URL", n.PublicURL, "the http(s) URL people reach the replicas at, such as https://scheduler.example.com")
	}
	atLeast(env, "SCHEDULER_NOTIFY_INTERVAL", n.Interval, time.Second, `a duration of at least 1s such as "1m"`)
	return n
}

// jobNotify reads a built-in job's SCHEDULER_JOB_<NAME>_NOTIFY_* (prefix ends with "_"). The
// URL's address is checked against the outbound guard when the replica is built, which knows
// SCHEDULER_HTTP_ALLOW; secrets are checked here.
func jobNotify(env *Env, prefix string) []notify.Rule {
	webhook, slack := env.String(prefix+notifyURLSuffix, ""), env.String(prefix+notifySlackSecretSuffix, "")
	signing := env.String(prefix+notifySigningSecretSuffix, "")
	on := notify.All
	if v := env.String(prefix+notifyOnSuffix, ""); v != "" {
		on = nil
		for _, ev := range strings.Split(v, ",") {
			on = append(on, strings.TrimSpace(ev))
		}
	}
	var rules []notify.Rule
	if webhook != "" {
		rules = append(rules, notify.Rule{On: on, Webhook: &notify.Webhook{URL: webhook, SigningSecret: signing}})
	} else if signing != "" {
		env.Fail(prefix+notifyURLSuffix, "", "a webhook URL, because "+prefix+notifySigningSecretSuffix+" is set")
	}
	if slack != "" {
		rules = append(rules, notify.Rule{On: on, Slack: &notify.Slack{URLSecret: slack}})
	}
	if len(rules) == 0 {
		if _, ok := env.lookup(prefix + notifyOnSuffix); ok {
			env.Fail(prefix+notifyURLSuffix, "", "a webhook URL (or "+prefix+notifySlackSecretSuffix+"), because "+prefix+notifyOnSuffix+" is set")
		}
		return nil
	}
	values := secrets(env)
	checker := notify.Checker{HasSecret: func(name string) bool { return values[name] != "" },
		SecretHint: func(name string) string { return "set " + secretPrefix + name }}
	failed := map[string]bool{}
	for _, p := range notify.Check("notify", rules, checker) {
		// Each field of a rule is one variable (both rules share NOTIFY_ON: one line for it).
		name := prefix + notifyOnSuffix
		switch {
		case strings.HasSuffix(p.Field, ".slack.url_secret"):
			name = prefix + notifySlackSecretSuffix
		case strings.HasSuffix(p.Field, ".webhook.signing_secret"):
			name = prefix + notifySigningSecretSuffix
		case strings.HasSuffix(p.Field, ".webhook.url"):
			name = prefix + notifyURLSuffix
		}
		if !failed[name] {
			value, _ := env.lookup(name)
			env.Fail(name, value, p.Message)
			failed[name] = true
		}
	}
	if u, err := url.Parse(webhook); webhook != "" && (err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "") {
		env.Fail(prefix+notifyURLSuffix, webhook, "an http(s) URL such as https://alerts.example.com/scheduler")
		failed[prefix+notifyURLSuffix] = true
	}
	if len(failed) > 0 {
		return nil
	}
	return rules
}
