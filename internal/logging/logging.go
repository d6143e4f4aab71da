// Package logging builds the scheduler's structured loggers (log/slog): one base logger per
// process, and per run a child that stamps every line with the run's identity, so any line
// of a run can be found by run_id without the job body having to remember to add it.
package logging

import (
	"context"
	"io"
	"log/slog"
	"net/url"
)

// Formats accepted by New (SCHEDULER_LOG_FORMAT).
const (
	FormatJSON = "json"
	FormatText = "text"
)

// New returns a logger writing to w at level and above, as JSON lines (format "json", the
// default for anything else) or logfmt-like text (format "text"). Configuration is expected to
// have validated format already; New does not fail, so a logger always exists to report errors.
func New(w io.Writer, level slog.Leveler, format string) *slog.Logger {
	opts := &slog.HandlerOptions{Level: level}
	if format == FormatText {
		return slog.New(slog.NewTextHandler(w, opts))
	}
	return slog.New(slog.NewJSONHandler(w, opts))
}

// ForInstance returns base with instance_id on every line. Build it once at start; every
// logger derived from it (leader, engine, API, runs) then names its replica.
func ForInstance(base *slog.Logger, instanceID string) *slog.Logger {
	return base.With("instance_id", instanceID)
}

// ForRun returns the logger of one run: every line it, or any logger derived from it, emits
// carries run_id, job and epoch. base must be the instance logger (ForInstance), so the line
// also carries instance_id exactly once. Build it when the run starts and pass it as
// job.Env.Log; the engine's own lines about that run (started, finished, timed out) should
// use it too.
func ForRun(base *slog.Logger, runID int64, job string, epoch int64) *slog.Logger {
	return base.With("run_id", runID, "job", job, "epoch", epoch)
}

type contextKey struct{}

// NewContext returns ctx carrying log, for code below a run that has no other way to get
// the run's logger (a message sender, an HTTP client's retry loop).
func NewContext(ctx context.Context, log *slog.Logger) context.Context {
	return context.WithValue(ctx, contextKey{}, log)
}

// FromContext returns the logger NewContext put in ctx, or fallback.
func FromContext(ctx context.Context, fallback *slog.Logger) *slog.Logger {
	if log, ok := ctx.Value(contextKey{}).(*slog.Logger); ok {
		return log
	}
	return fallback
}

// RedactURL is a URL as logs, errors and API answers show it: its user info and every query
// value (where a token often travels) hidden. A URL that does not parse is hidden whole.
func RedactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(unparsable URL)"
	}
	if u.User != nil {
		u.User = url.User("REDACTED")
	}
	if u.RawQuery != "" {
		q := u.Query()
		for k := range q {
			q[k] = []string{"REDACTED"}
		}
		u.RawQuery = q.Encode()
	}
	return u.String()
}
