package jobs

import (
	"fmt"
	"log/slog"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/schedulerhq/scheduler/internal/config"
	"github.com/schedulerhq/scheduler/internal/logging"
)

// Settings are the business jobs' own settings (schedules and timeouts are config.Job's).
type Settings struct {
	Abandon AbandonSettings
	Sender  SenderSettings
	// Send bounds the message pipeline; the service fills it from config (SCHEDULER_SEND_*).
	Send SendSettings
	// Appointments configure the appointment jobs; the service fills NoShowGrace from config
	// (SCHEDULER_NO_SHOW_GRACE).
	Appointments AppointmentSettings
	Retention    RetentionSettings
}

// SenderSettings choose how messages leave.
type SenderSettings struct {
	// Kind is "log" (the default: messages are logged, not delivered) or "webhook".
	Kind    string
	Webhook WebhookSettings
}

// Sender kinds.
const (
	SenderLog     = "log"
	SenderWebhook = "webhook"
)

// LoadSettings reads the jobs' settings from env. A bad value is recorded on env (see
// env.Err) and replaced by its default, so every mistake is reported at once.
//
//	SCHEDULER_ABANDON_DELAY                 30m   a started, unsubmitted form counts as abandoned after this
//	SCHEDULER_ABANDON_CLAIM_TIMEOUT         10m   a PENDING message older than this was orphaned by a crash
//	SCHEDULER_ABANDON_BATCH_SIZE            100   leads claimed (messages sent) per batch
//	SCHEDULER_SENDER                        log   log | webhook
//	SCHEDULER_WEBHOOK_URL                         http(s) URL; required with SCHEDULER_SENDER=webhook
//	SCHEDULER_WEBHOOK_TIMEOUT               10s   per attempt
//	SCHEDULER_WEBHOOK_MAX_ATTEMPTS          4     attempts per message (5xx, 429 and network errors are retried)
//	SCHEDULER_WEBHOOK_BACKOFF               500ms wait before the first retry, doubled each time
//	SCHEDULER_RETENTION_JOB_RUNS            30d   a day of runs is dropped whole this long after it ends
//	SCHEDULER_RETENTION_MESSAGE_DELIVERIES  90d   message deliveries older than this are deleted
//	SCHEDULER_RETENTION_LEADS               180d  abandoned, unsubmitted leads older than this are deleted
//	SCHEDULER_RETENTION_OPERATOR_ACTIONS    365d  audit log entries (operator_actions) older than this are deleted
//	SCHEDULER_RETENTION_BATCH_SIZE          5000  rows per delete transaction (the tables other than job_runs)
//	SCHEDULER_RETENTION_PAUSE               50ms  wait between two delete batches
//
// Windows take a Go duration ("720h") or a number of days ("30d").
func LoadSettings(env *config.Env) Settings {
	var s Settings

	s.Abandon.Delay = positiveDuration(env, "SCHEDULER_ABANDON_DELAY", abandonDelayDefault)
	s.Abandon.ClaimTimeout = positiveDuration(env, "SCHEDULER_ABANDON_CLAIM_TIMEOUT", abandonClaimTimeoutDefault)
	s.Abandon.BatchSize = intBetween(env, "SCHEDULER_ABANDON_BATCH_SIZE", abandonBatchSizeDefault, 1, 10_000)

	s.Sender.Kind = env.String("SCHEDULER_SENDER", SenderLog)
	if s.Sender.Kind != SenderLog && s.Sender.Kind != SenderWebhook {
		env.Fail("SCHEDULER_SENDER", s.Sender.Kind, "one of log, webhook")
		s.Sender.Kind = SenderLog
	}
	w := &s.Sender.Webhook
	w.URL = env.String("SCHEDULER_WEBHOOK_URL", "")
	w.Timeout = positiveDuration(env, "SCHEDULER_WEBHOOK_TIMEOUT", webhookTimeoutDefault)
	w.MaxAttempts = intBetween(env, "SCHEDULER_WEBHOOK_MAX_ATTEMPTS", webhookMaxAttemptsDefault, 1, 20)
	w.Backoff = positiveDuration(env, "SCHEDULER_WEBHOOK_BACKOFF", webhookBackoffDefault)
	if s.Sender.Kind == SenderWebhook {
		if u, err := url.Parse(w.URL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			env.Fail("SCHEDULER_WEBHOOK_URL", logging.RedactURL(w.URL), "an http:// or https:// URL (required with SCHEDULER_SENDER=webhook)")
		}
		// A send still retrying must not be taken for one orphaned by a crash.
		if longest := w.longestSend(); s.Abandon.ClaimTimeout <= longest {
			env.Fail("SCHEDULER_ABANDON_CLAIM_TIMEOUT", env.String("SCHEDULER_ABANDON_CLAIM_TIMEOUT", ""), fmt.Sprintf(
				"more than the longest webhook send, %s (SCHEDULER_WEBHOOK_TIMEOUT × SCHEDULER_WEBHOOK_MAX_ATTEMPTS plus backoff)",
				longest))
		}
	}

	s.Retention.JobRuns = window(env, "SCHEDULER_RETENTION_JOB_RUNS", retentionJobRunsDefault)
	s.Retention.MessageDeliveries = window(env, "SCHEDULER_RETENTION_MESSAGE_DELIVERIES", retentionMessageDeliveriesDefault)
	s.Retention.Leads = window(env, "SCHEDULER_RETENTION_LEADS", retentionLeadsDefault)
	s.Retention.OperatorActions = window(env, "SCHEDULER_RETENTION_OPERATOR_ACTIONS", retentionOperatorActionsDefault)
	s.Retention.BatchSize = intBetween(env, "SCHEDULER_RETENTION_BATCH_SIZE", retentionBatchSizeDefault, 1, 100_000)
	s.Retention.Pause = env.Duration("SCHEDULER_RETENTION_PAUSE", retentionPauseDefault)
	if s.Retention.Pause < 0 {
		env.Fail("SCHEDULER_RETENTION_PAUSE", env.String("SCHEDULER_RETENTION_PAUSE", ""), `a duration of 0 or more, such as "50ms"`)
		s.Retention.Pause = retentionPauseDefault
	}
	// A claim's timeout depends on the sender, not on the job: the appointment jobs' claims
	// are orphans after the same time as abandon-recovery's.
	s.Appointments.ClaimTimeout = s.Abandon.ClaimTimeout
	return s
}

// NewSender builds the configured sender; the log sender writes on log.
func NewSender(s SenderSettings, log *slog.Logger) Sender {
	if s.Kind == SenderWebhook {
		return NewWebhookSender(s.Webhook)
	}
	return NewLogSender(log)
}

// longestSend is the longest a webhook send can take: every attempt timing out, plus the
// backoff waits between them.
func (w WebhookSettings) longestSend() time.Duration {
	total := time.Duration(w.MaxAttempts) * w.Timeout
	for i, wait := 1, w.Backoff; i < w.MaxAttempts; i, wait = i+1, wait*2 {
		total += wait
	}
	return total
}

func positiveDuration(env *config.Env, name string, def time.Duration) time.Duration {
	d := env.Duration(name, def)
	if d <= 0 {
		env.Fail(name, env.String(name, ""), `a duration above 0, such as "30s" or "10m"`)
		return def
	}
	return d
}

func intBetween(env *config.Env, name string, def, lo, hi int) int {
	n := env.Int(name, def)
	if n < lo || n > hi {
		env.Fail(name, env.String(name, ""), fmt.Sprintf("a whole number from %d to %d", lo, hi))
		return def
	}
	return n
}

// window reads a retention window: a Go duration or a whole number of days ("30d").
func window(env *config.Env, name string, def time.Duration) time.Duration {
	v := env.String(name, "")
	if v == "" {
		return def
	}
	d, err := time.ParseDuration(v)
	if days, ok := strings.CutSuffix(v, "d"); ok {
		var n int
		n, err = strconv.Atoi(days)
		d = time.Duration(n) * 24 * time.Hour
	}
	if err != nil || d <= 0 {
		env.Fail(name, v, `a number of days such as "30d", or a Go duration above 0 such as "720h"`)
		return def
	}
	return d
}
