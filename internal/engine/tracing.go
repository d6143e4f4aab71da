package engine

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/schedulerhq/scheduler/internal/namespace"
	"github.com/schedulerhq/scheduler/internal/store"
	"github.com/schedulerhq/scheduler/internal/tracing"
)

// The engine's spans (docs/operations.md, "Tracing"). A run's trace begins with the claim
// that started it: its slot's share of a claim batch, or its pick-up from the queue (under
// the trigger's traceparent, for a manual run that brought one). The run's span is the
// claim's child; its calls and SQL statements are the run's children (internal/targets).
const (
	spanClaimBatch = "scheduler.claim.batch"
	spanClaim      = "scheduler.claim"
	spanRun        = "scheduler.run"
)

// Span attributes; the spans of one run share the job's and the run's.
const (
	attrJob        = attribute.Key("scheduler.job")
	attrNamespace  = attribute.Key("scheduler.namespace")
	attrRunID      = attribute.Key("scheduler.run.id")
	attrTrigger    = attribute.Key("scheduler.run.trigger")
	attrStatus     = attribute.Key("scheduler.run.status")
	attrSlot       = attribute.Key("scheduler.slot")
	attrEpoch      = attribute.Key("scheduler.epoch")
	attrClaimCount = attribute.Key("scheduler.claim.count")
	attrClaimWon   = attribute.Key("scheduler.claim.won")
)

// claimTrace is the span of one claim batch's transaction. Zero (tracing off), its methods
// do nothing.
type claimTrace struct {
	tracer trace.Tracer
	span   trace.Span
	start  time.Time
}

// traceClaims starts the span of a batch of n claims: a root of its own, since it serves
// many runs' traces at once.
func (e *Engine) traceClaims(ctx context.Context, n int) claimTrace {
	if !e.conf.Tracing.Enabled() {
		return claimTrace{}
	}
	t := claimTrace{tracer: e.conf.Tracing.Tracer(), start: time.Now()}
	_, t.span = t.tracer.Start(ctx, spanClaimBatch, trace.WithNewRoot(), trace.WithTimestamp(t.start),
		trace.WithAttributes(attrClaimCount.Int(n)))
	return t
}

// end ends the batch's span once its transaction has answered.
func (t claimTrace) end(outs []store.ClaimOutcome, err error) {
	if t.span == nil {
		return
	}
	won := 0
	for _, out := range outs {
		if startsRun(out) {
			won++
		}
	}
	t.span.SetAttributes(attrClaimWon.Int(won))
	if err != nil {
		t.span.RecordError(err)
		t.span.SetStatus(codes.Error, "the claim batch's transaction failed")
	}
	t.span.End()
}

// slot is ctx under the claim span of r's slot when the batch won it a run, whose trace it
// begins: the slot's share of the batch, linked to the batch's span. A slot that starts no
// run (skipped, taken, busy) has no span but the batch's counts, so that a thousand paused
// jobs do not make a thousand traces a minute.
func (t claimTrace) slot(ctx context.Context, r *claimRequest, out store.ClaimOutcome) context.Context {
	if t.span == nil || !startsRun(out) {
		return ctx
	}
	ctx, span := t.tracer.Start(ctx, spanClaim, trace.WithNewRoot(), trace.WithTimestamp(t.start),
		trace.WithLinks(trace.Link{SpanContext: t.span.SpanContext()}),
		trace.WithAttributes(attrJob.String(r.en.conf.Name), attrNamespace.String(namespace.Of(r.en.conf.Name)),
			attrRunID.Int64(out.Run.ID), attrTrigger.String(r.trigger), attrSlot.String(r.slot.UTC().Format(time.RFC3339Nano))))
	span.End()
	return ctx
}

// startsRun is whether a claim's outcome starts a run (claimed's last case).
func startsRun(out store.ClaimOutcome) bool {
	return out.Run != nil && out.Early <= 0 && !out.Busy && !out.Taken && !out.Finished && out.Skipped == ""
}

// traceQueued is ctx under the claim span of a queued run's pick-up, which began at start: a
// child of the traceparent its trigger brought, if any.
func (e *Engine) traceQueued(ctx context.Context, start time.Time, run *store.Run) context.Context {
	if !e.conf.Tracing.Enabled() {
		return ctx
	}
	ctx, span := e.conf.Tracing.Tracer().Start(e.remoteParent(ctx, run), spanClaim, trace.WithTimestamp(start),
		trace.WithAttributes(attrJob.String(run.Job), attrNamespace.String(namespace.Of(run.Job)),
			attrRunID.Int64(run.ID), attrTrigger.String(run.Trigger)))
	span.End()
	return ctx
}

// remoteParent is ctx under the span of the traceparent run's trigger brought, unless ctx
// already has a span (its claim's).
func (e *Engine) remoteParent(ctx context.Context, run *store.Run) context.Context {
	if run.Traceparent == nil || trace.SpanContextFromContext(ctx).IsValid() {
		return ctx
	}
	return tracing.WithRemoteParent(ctx, *run.Traceparent)
}

// traceRun starts the run's span, under its claim's (in ctx).
func (e *Engine) traceRun(ctx context.Context, epoch int64, run *store.Run) (context.Context, trace.Span) {
	if !e.conf.Tracing.Enabled() {
		return ctx, trace.SpanFromContext(context.Background()) // the no-op span
	}
	attrs := []attribute.KeyValue{attrJob.String(run.Job), attrNamespace.String(namespace.Of(run.Job)),
		attrRunID.Int64(run.ID), attrTrigger.String(run.Trigger), attrEpoch.Int64(epoch)}
	if run.ScheduledAt != nil {
		attrs = append(attrs, attrSlot.String(run.ScheduledAt.UTC().Format(time.RFC3339Nano)))
	}
	return e.conf.Tracing.Tracer().Start(e.remoteParent(ctx, run), spanRun, trace.WithAttributes(attrs...))
}

// endRun ends the run's span with the status its end recorded.
func endRun(span trace.Span, x *execution) {
	if !span.IsRecording() {
		return
	}
	status := x.status
	if status == "" {
		status = statusAccepted // a callback run, which its target finishes
	}
	span.SetAttributes(attrStatus.String(status))
	switch status {
	case store.StatusFailed, store.StatusTimedOut:
		span.SetStatus(codes.Error, "the run "+status)
	}
	span.End()
}
