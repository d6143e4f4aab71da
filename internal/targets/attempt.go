package targets

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/schedulerhq/scheduler/internal/tracing"
)

const (
	keptBodyBytes = 4 << 10 // what an Attempt keeps of the response, for the run's history
	// maxBodyBytes is the most read of a response before the connection is dropped: reading
	// to the end lets the connection be reused, but a target must not make us read forever.
	maxBodyBytes = 1 << 20
)

// reservedHeaders are set by the caller on every attempt and replace any the user wrote, so
// that a receiver can trust them (a user could otherwise reuse another job's idempotency key).
var reservedHeaders = []string{
	"Idempotency-Key", "X-Scheduler-Run-Id", "X-Scheduler-Scheduled-At", "X-Scheduler-Attempt",
	"Webhook-Id", "Webhook-Timestamp", "Webhook-Signature", "User-Agent",
}

// attempt makes try number n of r once the caller holds its concurrency slots. retryAfter is
// what a 429 or 503 asked for, 0 otherwise.
func (c *Caller) attempt(ctx context.Context, r *Request, n int) (a Attempt, retryAfter time.Duration) {
	timeout := cmpOr(r.AttemptTimeout, attemptTimeoutDefault)
	spanCtx, span := traceAttempt(ctx, r, n)
	attemptCtx, cancel := context.WithTimeout(spanCtx, timeout)
	defer cancel()
	a = Attempt{Number: n, StartedAt: time.Now()}
	defer func() { a.Duration = time.Since(a.StartedAt); endAttempt(span, a) }()

	req, err := http.NewRequestWithContext(withAllowedHosts(attemptCtx, r.AllowedHosts), r.Method, r.URL, bytes.NewReader(r.Body))
	if err != nil {
		a.Error = fmt.Sprintf("cannot build the request: %v", err)
		return a, 0
	}
	req.Header = attemptHeader(r, n, a.StartedAt)
	if r.Authorize != nil {
		v, err := r.Authorize(attemptCtx, n)
		if err != nil {
			a.Error, a.Retryable = fmt.Sprintf("not attempted, nothing was sent: %v", err), true
			return a, 0
		}
		req.Header.Set("Authorization", v)
	}
	tracing.Inject(spanCtx, req.Header) // the target's trace continues from this attempt's span
	resp, err := c.clientFor(r.Guard).Do(req)
	if err != nil {
		a.Error, a.Retryable = describeError(ctx, attemptCtx, err, timeout)
		return a, 0
	}
	defer resp.Body.Close()
	a.StatusCode = resp.StatusCode
	a.Body, err = readBody(resp.Body)
	if err != nil {
		a.Error, a.Retryable = describeError(ctx, attemptCtx, err, timeout)
		a.Error += " while reading the response body"
		return a, 0
	}

	code := resp.StatusCode
	switch {
	case isSuccess(r.Success, code):
		return a, 0
	case code >= 300 && code < 400 && resp.Header.Get("Location") != "":
		location := resp.Header.Get("Location")
		if u, err := resp.Location(); err == nil {
			location = u.String()
		}
		a.Error = fmt.Sprintf("redirect to %s not followed", location)
		return a, 0
	}
	a.Error = fmt.Sprintf("status %d is not a success status", code)
	a.Retryable = code == http.StatusRequestTimeout || code == http.StatusTooManyRequests || code >= 500 && code < 600
	if code == http.StatusTooManyRequests || code == http.StatusServiceUnavailable {
		retryAfter = parseRetryAfter(resp.Header.Get("Retry-After"), time.Now())
	}
	return a, retryAfter
}

// NoAnswer is the StatusClass of an attempt that got no answer: refused address, DNS,
// connection, timeout, TLS.
const NoAnswer = "error"

// StatusClass names an attempt's outcome, the same wherever attempts are counted (a run's
// stats detail, scheduler_target_calls_total's class label): "1xx" ... "5xx" for an answer,
// NoAnswer for none (status 0) or a status outside 100-599, which keeps the label's values few.
func StatusClass(code int) string {
	if code < 100 || code > 599 {
		return NoAnswer
	}
	return fmt.Sprintf("%dxx", code/100)
}

// attemptHeader is r.Header with the reserved headers of attempt n, made at `at`, in place.
func attemptHeader(r *Request, n int, at time.Time) http.Header {
	h := make(http.Header, len(r.Header)+len(reservedHeaders))
	for k, v := range r.Header {
		// Compared canonically, so that a header added as h["webhook-id"] cannot slip past Set.
		if !slices.Contains(reservedHeaders, http.CanonicalHeaderKey(k)) {
			h[k] = slices.Clone(v)
		}
	}
	timestamp := at.Unix()
	h.Set("User-Agent", "scheduler")
	h.Set("Idempotency-Key", r.IdempotencyKey)
	if r.RunID != 0 { // a notification is about runs, not made by one
		h.Set("X-Scheduler-Run-Id", strconv.FormatInt(r.RunID, 10))
	}
	h.Set("X-Scheduler-Attempt", strconv.Itoa(n))
	if !r.ScheduledAt.IsZero() {
		h.Set("X-Scheduler-Scheduled-At", r.ScheduledAt.UTC().Format(time.RFC3339Nano))
	}
	h.Set("Webhook-Id", r.IdempotencyKey)
	h.Set("Webhook-Timestamp", strconv.FormatInt(timestamp, 10))
	if r.SigningKey != nil {
		// Signed anew each attempt: the timestamp is inside the signature, and receivers
		// refuse a timestamp minutes old as a replay.
		h.Set("Webhook-Signature", Sign(r.SigningKey, r.IdempotencyKey, timestamp, r.Body))
	}
	return h
}

func isSuccess(success []int, code int) bool {
	if len(success) == 0 {
		return code >= 200 && code < 300
	}
	return slices.Contains(success, code)
}

// describeError words a failed request for the run's history and says whether another attempt
// could fare better. ctx is the call's, attemptCtx the attempt's own (ended by its timeout).
func describeError(ctx, attemptCtx context.Context, err error, timeout time.Duration) (words string, retryable bool) {
	var (
		refused *RefusedError
		notHere *HostNotAllowedError
		dnsErr  *net.DNSError
		certErr *tls.CertificateVerificationError
		opErr   *net.OpError
		netErr  net.Error
	)
	switch {
	case errors.As(err, &refused):
		return refused.Error(), false
	case errors.As(err, &notHere):
		return notHere.Error(), false // the secret's hosts do not change by asking again
	case ctx.Err() != nil:
		return "stopped: " + context.Cause(ctx).Error(), false
	case attemptCtx.Err() != nil:
		return fmt.Sprintf("timed out after %s", timeout), true
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection refused", true
	case errors.Is(err, syscall.ECONNRESET):
		return "connection reset by the server", true
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return "the server closed the connection before answering in full", true
	case errors.As(err, &dnsErr):
		return fmt.Sprintf("cannot resolve %s: %s", dnsErr.Name, dnsErr.Err), true
	case errors.As(err, &certErr):
		// A certificate does not become trusted by asking again.
		return "TLS certificate not accepted: " + certErr.Err.Error(), false
	case errors.As(err, &opErr) && opErr.Op == "dial" && opErr.Timeout():
		return fmt.Sprintf("connect timed out after %s", dialTimeout), true
	case errors.As(err, &netErr) && netErr.Timeout():
		return "timed out: " + unwrapURLError(err).Error(), true
	}
	return unwrapURLError(err).Error(), true
}

// unwrapURLError drops the `Post "https://...": ` that net/http puts before every error: the
// history shows the URL already, and it may carry a token in its query.
func unwrapURLError(err error) error {
	var urlErr *url.Error
	if errors.As(err, &urlErr) {
		return urlErr.Err
	}
	return err
}

// readBody keeps the first keptBodyBytes of body and reads on to at most maxBodyBytes.
func readBody(body io.Reader) (string, error) {
	kept, err := io.ReadAll(io.LimitReader(body, keptBodyBytes))
	if err == nil {
		_, err = io.Copy(io.Discard, io.LimitReader(body, maxBodyBytes-keptBodyBytes))
	}
	return cleanUTF8(kept), err
}

// cleanUTF8 makes b valid UTF-8 of at most keptBodyBytes: a character cut in half by the
// limit is dropped, and bytes that are not UTF-8 become U+FFFD.
func cleanUTF8(b []byte) string {
	if i := lastRuneStart(b); i >= 0 && !utf8.FullRune(b[i:]) {
		b = b[:i]
	}
	s := strings.ToValidUTF8(string(b), "\uFFFD")
	if len(s) > keptBodyBytes { // each replacement is 3 bytes where the bad byte was 1
		i := keptBodyBytes
		for i > 0 && !utf8.RuneStart(s[i]) {
			i--
		}
		s = s[:i]
	}
	return s
}

// lastRuneStart is the index of the byte where the last character of b may begin, or -1.
func lastRuneStart(b []byte) int {
	for i := len(b) - 1; i >= 0 && i >= len(b)-utf8.UTFMax; i-- {
		if utf8.RuneStart(b[i]) {
			return i
		}
	}
	return -1
}

// parseRetryAfter reads a Retry-After header: delay-seconds or an HTTP-date. Unreadable: 0.
func parseRetryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if secs, err := strconv.ParseInt(v, 10, 64); err == nil {
		const longest = int64(365 * 24 * time.Hour / time.Second) // more is nonsense, and far more overflows
		return time.Duration(min(max(secs, 0), longest)) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(t.Sub(now), 0)
	}
	return 0
}
