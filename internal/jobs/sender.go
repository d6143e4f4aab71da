package jobs

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/schedulerhq/scheduler/internal/backoff"
	"github.com/schedulerhq/scheduler/internal/config"
	"github.com/schedulerhq/scheduler/internal/logging"
)

// Message is one message a job sends, as recorded in its message_deliveries row.
type Message struct {
	// DeliveryID is the message_deliveries row that claimed the message.
	DeliveryID int64 `json:"delivery_id"`
	// Attempt counts the claims of the delivery: 1, or more when a claim orphaned by a crash
	// was taken over. It fences the outcome: only the latest claim may record one.
	Attempt  int             `json:"attempt"`
	Provider string          `json:"provider"`
	Channel  string          `json:"channel"` // EMAIL, SMS or WHATSAPP
	To       string          `json:"to"`
	Template string          `json:"template"`
	Payload  json.RawMessage `json:"payload"`
	// Deployment names the database that claimed the message (scheduler_identity), so its
	// key is unique among every deployment a receiver hears from.
	Deployment string `json:"deployment_id"`
}

// IdempotencyKey names the message for the provider: the same delivery always carries the
// same key, so a provider that de-duplicates on it delivers a resent message once; and the
// deployment in it keeps two deployments' deliveries of the same id apart.
func (m Message) IdempotencyKey() string {
	return "message-delivery-" + m.Deployment + "-" + strconv.FormatInt(m.DeliveryID, 10)
}

// Sender delivers messages to a provider.
type Sender interface {
	// Provider names the provider in message_deliveries.provider.
	Provider() string
	// Idempotent reports whether the provider de-duplicates on Message.IdempotencyKey. Only
	// then may a message whose send outcome was lost in a crash be sent again.
	Idempotent() bool
	// Send delivers m and returns the provider's id for it ("" if it gives none).
	Send(ctx context.Context, m Message) (providerMessageID string, err error)
}

// LogSender is the default sender: it writes each message to the log and delivers nothing.
type LogSender struct {
	log *slog.Logger
}

// NewLogSender returns a sender that logs messages on log.
func NewLogSender(log *slog.Logger) *LogSender { return &LogSender{log: log} }

func (*LogSender) Provider() string { return "log" }

// Idempotent is false: a log line cannot be taken back, so a lost outcome is not resent.
func (*LogSender) Idempotent() bool { return false }

func (s *LogSender) Send(ctx context.Context, m Message) (string, error) {
	// The run's logger when there is one, so the line carries the run's run_id.
	logging.FromContext(ctx, s.log).InfoContext(ctx, "message sent (log sender: logged, not delivered)",
		"delivery_id", m.DeliveryID, "channel", m.Channel, "to", m.To, "template", m.Template,
		"payload", string(m.Payload))
	return m.IdempotencyKey(), nil
}

// WebhookSettings configure the webhook sender.
type WebhookSettings struct {
	// URL receives each message as an HTTP POST of its JSON.
	URL string
	// Timeout bounds each attempt.
	Timeout time.Duration
	// MaxAttempts bounds the attempts per message (1 = no retry).
	MaxAttempts int
	// Backoff is the wait before the first retry, doubled before each next one (up to 30 s),
	// with jitter: between half and all of each step.
	Backoff time.Duration
}

// Webhook sender defaults.
const (
	webhookTimeoutDefault     = 10 * time.Second
	webhookMaxAttemptsDefault = 4
	webhookBackoffDefault     = 500 * time.Millisecond
	// webhookBackoffMax caps the wait between two attempts of one message.
	webhookBackoffMax = 30 * time.Second
)

// WebhookSender POSTs each message as JSON to a URL, with the delivery's idempotency key in
// the Idempotency-Key header. It retries network errors, 5xx and 429 answers with exponential
// backoff, up to MaxAttempts; any other answer outside 2xx fails at once.
type WebhookSender struct {
	s      WebhookSettings
	client *http.Client
	// shownURL is the URL as errors, logs and message_deliveries.error show it: its
	// credentials and query values (a token is often passed there) redacted.
	shownURL string
}

// withoutURL drops the URL a *url.Error quotes as requested (credentials and all): the
// caller names the URL redacted.
func withoutURL(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// NewWebhookSender returns a webhook sender; zero settings take the defaults.
func NewWebhookSender(s WebhookSettings) *WebhookSender {
	if s.Timeout <= 0 {
		s.Timeout = webhookTimeoutDefault
	}
	if s.MaxAttempts <= 0 {
		s.MaxAttempts = webhookMaxAttemptsDefault
	}
	if s.Backoff <= 0 {
		s.Backoff = webhookBackoffDefault
	}
	// Keep a connection per concurrent send (up to the largest SCHEDULER_SEND_CONCURRENCY):
	// http.DefaultTransport keeps 2 idle per host, so with more sends in flight most would
	// open (and leave in TIME_WAIT) a new connection.
	transport := http.DefaultTransport.(*http.Transport).Clone()
	transport.MaxIdleConnsPerHost = config.MaxSendConcurrency
	transport.MaxIdleConns = config.MaxSendConcurrency
	return &WebhookSender{s: s, client: &http.Client{Timeout: s.Timeout, Transport: transport}, shownURL: logging.RedactURL(s.URL)}
}

func (*WebhookSender) Provider() string { return "webhook" }

// Idempotent is true: the receiver gets the same Idempotency-Key for every send of a delivery
// and is expected to de-duplicate on it.
func (*WebhookSender) Idempotent() bool { return true }

// errPermanent marks an answer that retrying cannot change.
var errPermanent = errors.New("permanent")

func (w *WebhookSender) Send(ctx context.Context, m Message) (string, error) {
	body, err := json.Marshal(m)
	if err != nil {
		return "", fmt.Errorf("encode message %d: %w", m.DeliveryID, err)
	}
	retry := backoff.New(w.s.Backoff, webhookBackoffMax)
	var lastErr error
	for attempt := 1; ; attempt++ {
		id, err := w.post(ctx, m, body)
		if err == nil {
			return id, nil
		}
		lastErr = fmt.Errorf("webhook attempt %d of %d: %w", attempt, w.s.MaxAttempts, err)
		if errors.Is(err, errPermanent) || attempt >= w.s.MaxAttempts || ctx.Err() != nil {
			return "", lastErr
		}
		if !backoff.Sleep(ctx, retry.Next()) {
			return "", errors.Join(lastErr, ctx.Err())
		}
	}
}

// post makes one attempt. The answer's JSON "id" (if any) is the provider's message id.
func (w *WebhookSender) post(ctx context.Context, m Message, body []byte) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, w.s.URL, bytes.NewReader(body))
	if err != nil {
		return "", fmt.Errorf("%w: build the request to %s: %v", errPermanent, w.shownURL, withoutURL(err))
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", m.IdempotencyKey())
	resp, err := w.client.Do(req)
	if err != nil { // network error or attempt timeout: retried
		return "", fmt.Errorf("POST %s: %w", w.shownURL, withoutURL(err))
	}
	defer resp.Body.Close()
	answer, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	switch {
	case resp.StatusCode >= 200 && resp.StatusCode < 300:
		var out struct {
			ID string `json:"id"`
		}
		_ = json.Unmarshal(answer, &out) // an answer without an id is still a success
		return out.ID, nil
	case resp.StatusCode >= 500 || resp.StatusCode == http.StatusTooManyRequests:
		return "", fmt.Errorf("POST %s: %s: %s", w.shownURL, resp.Status, snippet(answer))
	default:
		return "", fmt.Errorf("%w: POST %s: %s: %s", errPermanent, w.shownURL, resp.Status, snippet(answer))
	}
}

// snippet keeps an answer body short enough for a log line and the delivery's error column.
func snippet(b []byte) string {
	const limit = 200
	if len(b) > limit {
		return string(b[:limit]) + "..."
	}
	return string(b)
}
