package targets

import (
	"context"
	"net/url"
	"strconv"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/schedulerhq/scheduler/internal/tracing"
)

// The spans of a run's calls and statements, children of the run's span in ctx
// (docs/operations.md, "Tracing"): none when the run is not traced.
const (
	spanAttempt = "scheduler.attempt"
	spanSQL     = "scheduler.sql"
)

// clientSpan makes a span a client's; made once, so that a call while tracing is off
// allocates nothing for it.
var clientSpan = []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindClient)}

// attrAttempt numbers an HTTP call's attempts from 1, as X-Scheduler-Attempt does.
const attrAttempt = attribute.Key("scheduler.attempt")

// traceAttempt starts the client span of attempt n of r.
func traceAttempt(ctx context.Context, r *Request, n int) (context.Context, trace.Span) {
	ctx, span := tracing.StartChild(ctx, spanAttempt, clientSpan...)
	if !span.IsRecording() {
		return ctx, span
	}
	attrs := []attribute.KeyValue{semconv.HTTPRequestMethodKey.String(r.Method), attrAttempt.Int(n)}
	if n > 1 {
		attrs = append(attrs, semconv.HTTPRequestResendCount(n-1))
	}
	if u, err := url.Parse(r.URL); err == nil {
		attrs = append(attrs, semconv.ServerAddress(u.Hostname()))
		if port, err := strconv.Atoi(u.Port()); err == nil {
			attrs = append(attrs, semconv.ServerPort(port))
		}
		// Without its query and user: either may carry a token, and spans leave the process.
		clean := url.URL{Scheme: u.Scheme, Host: u.Host, Path: u.Path}
		attrs = append(attrs, semconv.URLFull(clean.String()))
	}
	span.SetAttributes(attrs...)
	return ctx, span
}

// endAttempt ends an attempt's span with its outcome.
func endAttempt(span trace.Span, a Attempt) {
	if !span.IsRecording() {
		span.End()
		return
	}
	if a.StatusCode != 0 {
		span.SetAttributes(semconv.HTTPResponseStatusCode(a.StatusCode))
	}
	if a.Error != "" {
		errType := StatusClass(a.StatusCode)
		if a.StatusCode != 0 {
			errType = strconv.Itoa(a.StatusCode)
		}
		span.SetAttributes(semconv.ErrorTypeKey.String(errType))
		span.SetStatus(codes.Error, a.Error)
	}
	span.End()
}

// traceSQL starts the client span of r's statements in target t.
func (t *SQLTarget) traceSQL(ctx context.Context) (context.Context, trace.Span) {
	ctx, span := tracing.StartChild(ctx, spanSQL, clientSpan...)
	if !span.IsRecording() {
		return ctx, span
	}
	span.SetAttributes(semconv.DBSystemNamePostgreSQL, semconv.DBNamespace(t.conf.Conn.Database),
		semconv.ServerAddress(t.conf.Conn.Host), semconv.ServerPort(int(t.conf.Conn.Port)),
		attribute.String("scheduler.sql.target", t.conf.Name))
	return ctx, span
}

// endSQL ends the statements' span with what they did.
func endSQL(span trace.Span, res SQLResult, err error) {
	if !span.IsRecording() {
		span.End()
		return
	}
	span.SetAttributes(attribute.Int("scheduler.sql.statements", res.Statements),
		attribute.Int64("scheduler.sql.rows_affected", res.RowsAffected))
	if res.AppliedBy != 0 {
		span.SetAttributes(attribute.Int64("scheduler.sql.applied_by_run_id", res.AppliedBy))
	}
	if res.River.JobID != 0 {
		span.SetAttributes(attribute.Int64("scheduler.river.job_id", res.River.JobID), attribute.Bool("scheduler.river.duplicate", res.River.Duplicate))
	}
	if err != nil {
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}
