package notify

import (
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/schedulerhq/scheduler/internal/namespace"
)

// The bodies of the messages: the webhook's JSON and Slack's one-liner.

const (
	// MaxBody bounds one message's body: a receiver must not be handed megabytes, and the
	// body is stored with its delivery. A storm larger than it is split over intervals.
	MaxBody = 256 << 10
	// MaxRuns bounds the runs one message lists; the rest wait for the next interval.
	MaxRuns = 500
	// maxError is what a message keeps of each run's error: enough to say what went wrong,
	// the whole error being one click away in the console.
	maxError = 300
)

// Event is one event a message covers, as the event row recorded it.
type Event struct {
	RunID       *int64
	ScheduledAt *time.Time
	Status      *string
	Error       *string
	// Detail is a pause's reason.
	Detail *string
}

// Run is one run as a message lists it.
type Run struct {
	ID          int64      `json:"id"`
	ScheduledAt *time.Time `json:"scheduled_at"`
	Status      string     `json:"status"`
	Error       *string    `json:"error"`
}

// Message is the webhook's JSON (docs/runtime-jobs.md, "Notifications").
type Message struct {
	// Type is "job." and the event: job.failed, job.timed_out, job.missed, job.recovered,
	// job.paused.
	Type      string `json:"type"`
	Job       string `json:"job"`
	Namespace string `json:"namespace"`
	Runs      []Run  `json:"runs"`
	// Count is how many events the message covers: its runs, and a pause without a run.
	Count      int    `json:"count"`
	ConsoleURL string `json:"console_url"`
	// Reasons are the pauses' reasons (job.paused only).
	Reasons []string `json:"reasons,omitempty"`
}

// Type is the message type of event.
func Type(event string) string { return "job." + event }

// ConsoleURL is the dashboard's page of the job under publicURL (SCHEDULER_PUBLIC_URL).
func ConsoleURL(publicURL, job string) string {
	ns, name := namespace.Split(job)
	base := strings.TrimRight(publicURL, "/") + "/ui/#/"
	if ns == namespace.Default {
		return base + "jobs/" + url.PathEscape(name)
	}
	return base + "ns/" + url.PathEscape(ns) + "/jobs/" + url.PathEscape(name) // the console's route (session.js)
}

// NewMessage is the message of events of one job and type.
func NewMessage(job, event, publicURL string, events []Event) Message {
	ns, name := namespace.Split(job)
	m := Message{Type: Type(event), Job: name, Namespace: ns, Runs: []Run{}, Count: len(events),
		ConsoleURL: ConsoleURL(publicURL, job)}
	for _, e := range events {
		if e.Detail != nil {
			m.Reasons = append(m.Reasons, *e.Detail)
		}
		if e.RunID == nil {
			continue
		}
		r := Run{ID: *e.RunID, Status: deref(e.Status)}
		if e.ScheduledAt != nil {
			at := e.ScheduledAt.UTC()
			r.ScheduledAt = &at
		}
		if e.Error != nil {
			s := cut(*e.Error, maxError)
			r.Error = &s
		}
		m.Runs = append(m.Runs, r)
	}
	return m
}

// Body is the message as kind sends it: the JSON itself to a webhook, {"text": ...} to Slack.
func (m Message) Body(kind string) ([]byte, error) {
	if kind == KindSlack {
		return json.Marshal(map[string]string{"text": m.SlackText()})
	}
	return json.Marshal(m)
}

// SlackText is the message in one line a person reads, with a link to the console.
func (m Message) SlackText() string {
	job := m.Job
	if m.Namespace != namespace.Default {
		job = m.Namespace + "/" + m.Job
	}
	var what string
	switch m.Type {
	case Type(Failed):
		what = "failed"
	case Type(TimedOut):
		what = "timed out"
	case Type(Missed):
		what = "missed its slot"
	case Type(Recovered):
		what = "recovered"
	case Type(Paused):
		what = "was paused"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "scheduler: job %s %s", slackEscape(job), what)
	if n := len(m.Runs); n > 1 {
		fmt.Fprintf(&b, " (%d runs)", n)
	}
	if n := len(m.Runs); n > 0 {
		last := m.Runs[n-1]
		fmt.Fprintf(&b, "; run %d", last.ID)
		if last.ScheduledAt != nil {
			fmt.Fprintf(&b, " of %s", last.ScheduledAt.Format(time.RFC3339))
		}
		if last.Error != nil && m.Type != Type(Recovered) {
			fmt.Fprintf(&b, ": %s", slackEscape(firstLine(*last.Error)))
		}
	}
	if len(m.Reasons) > 0 {
		fmt.Fprintf(&b, ": %s", slackEscape(firstLine(m.Reasons[len(m.Reasons)-1])))
	}
	fmt.Fprintf(&b, ". <%s|Open in the console>", m.ConsoleURL)
	return b.String()
}

// slackEscape escapes what Slack's mrkdwn reads as markup, so that an error cannot forge a
// link or a mention.
func slackEscape(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace(s)
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	return cut(s, 200)
}

// cut keeps at most n bytes of s, never splitting a character, and says it was cut.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	i := n
	for i > 0 && !utf8.RuneStart(s[i]) {
		i--
	}
	return s[:i] + "…"
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
