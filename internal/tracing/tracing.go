// Package tracing is the scheduler's OpenTelemetry tracing: the tracer provider `scheduler
// serve` starts from the standard OTEL_* variables, and the W3C trace context a run's calls
// carry and a manual trigger brings.
//
// Tracing is off unless an OTLP endpoint is named (OTEL_EXPORTER_OTLP_ENDPOINT or
// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) or OTEL_TRACES_EXPORTER=otlp is set; OTEL_SDK_DISABLED=true
// or OTEL_TRACES_EXPORTER=none keeps it off. Off, there is no exporter and no provider: the
// tracer is OpenTelemetry's no-op one, no span exists, and no call carries a traceparent
// (a span that records nothing would still hand on the context it was started under).
//
// The variables are read from the process's environment, here as by the SDK, which reads the
// exporter's (headers, timeout, compression, certificates), the sampler's (OTEL_TRACES_SAMPLER)
// and the batch processor's (OTEL_BSP_*) itself.
package tracing

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"strconv"
	"strings"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/schedulerhq/scheduler/internal/config"
)

// Scope is the instrumentation scope of every span the scheduler makes.
const Scope = "github.com/schedulerhq/scheduler"

// serviceNameDefault names the service when OTEL_SERVICE_NAME does not.
const serviceNameDefault = "scheduler"

// Tracing is the process's tracer provider. A nil *Tracing is tracing off: its methods are
// safe to call and cost nothing.
type Tracing struct {
	provider *sdktrace.TracerProvider
	tracer   trace.Tracer
}

// Service describes this process in every span's resource; OTEL_SERVICE_NAME and
// OTEL_RESOURCE_ATTRIBUTES override it.
type Service struct {
	Version    string // service.version
	InstanceID string // service.instance.id: SCHEDULER_INSTANCE_ID
}

// Start starts tracing as the OTEL_* variables of the process's environment ask, or returns
// nil (off) when they ask for none. Its errors are *config.Error, joined, one per variable.
// log receives the SDK's errors (an export that failed), which it would otherwise print
// to stderr unformatted.
func Start(ctx context.Context, s Service, log *slog.Logger) (*Tracing, error) {
	on, err := enabled(os.LookupEnv)
	if err != nil || !on {
		return nil, err
	}
	exporter, err := otlptracehttp.New(ctx)
	if err != nil {
		return nil, fmt.Errorf("the OTLP trace exporter (OTEL_EXPORTER_OTLP_*): %w", err)
	}
	res, err := resource.New(ctx,
		resource.WithAttributes(semconv.ServiceName(serviceNameDefault), semconv.ServiceVersion(s.Version),
			semconv.ServiceInstanceID(s.InstanceID)),
		resource.WithFromEnv(), // after ours, so that OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES win
		resource.WithTelemetrySDK())
	if err != nil {
		return nil, &config.Error{Var: "OTEL_RESOURCE_ATTRIBUTES", Value: os.Getenv("OTEL_RESOURCE_ATTRIBUTES"),
			Want: "key=value pairs separated by commas, e.g. deployment.environment.name=prod"}
	}
	if log != nil {
		otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) {
			log.Warn("tracing: the OpenTelemetry SDK reported an error; spans may be lost", "error", err)
		}))
	}
	// The sampler is the SDK's default: OTEL_TRACES_SAMPLER, parentbased_always_on unset.
	p := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exporter), sdktrace.WithResource(res))
	return &Tracing{provider: p, tracer: p.Tracer(Scope)}, nil
}

// enabled decides from the environment whether tracing is on, and refuses what this build
// cannot do (an exporter other than OTLP over HTTP) rather than export nothing in silence.
func enabled(lookup func(string) (string, bool)) (bool, error) {
	get := func(name string) string {
		v, _ := lookup(name)
		return strings.TrimSpace(v)
	}
	var errs []error
	disabled := false
	if v := get("OTEL_SDK_DISABLED"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			errs = append(errs, &config.Error{Var: "OTEL_SDK_DISABLED", Value: v, Want: "true or false"})
		}
		disabled = b
	}
	exporter := strings.ToLower(get("OTEL_TRACES_EXPORTER"))
	switch exporter {
	case "", "otlp", "none":
	default:
		errs = append(errs, &config.Error{Var: "OTEL_TRACES_EXPORTER", Value: exporter,
			Want: "otlp (the default once an endpoint is set) or none"})
	}
	for _, name := range []string{"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"} {
		if v := get(name); v != "" && v != "http/protobuf" {
			errs = append(errs, &config.Error{Var: name, Value: v,
				Want: "http/protobuf, the protocol this build exports with (the collector's port 4318, e.g. OTEL_EXPORTER_OTLP_ENDPOINT=http://collector:4318)"})
		}
	}
	if err := checkSampler(get("OTEL_TRACES_SAMPLER"), get("OTEL_TRACES_SAMPLER_ARG")); err != nil {
		errs = append(errs, err)
	}
	if len(errs) > 0 {
		return false, errors.Join(errs...)
	}
	endpoint := get("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != ""
	return !disabled && exporter != "none" && (endpoint || exporter == "otlp"), nil
}

// checkSampler refuses a sampler the SDK would replace by its default with only a line on
// stderr: an operator who asked for 1% must not get every trace.
func checkSampler(name, arg string) error {
	switch name {
	case "", "always_on", "always_off", "parentbased_always_on", "parentbased_always_off":
		return nil
	case "traceidratio", "parentbased_traceidratio":
		if arg == "" {
			return nil // the SDK's 1.0
		}
		if r, err := strconv.ParseFloat(arg, 64); err != nil || r < 0 || r > 1 {
			return &config.Error{Var: "OTEL_TRACES_SAMPLER_ARG", Value: arg, Want: "a ratio from 0 to 1, e.g. 0.01"}
		}
		return nil
	}
	return &config.Error{Var: "OTEL_TRACES_SAMPLER", Value: name,
		Want: "one of always_on, always_off, traceidratio, parentbased_always_on, parentbased_always_off, parentbased_traceidratio"}
}

// off is the tracer of tracing off, and offSpan its span: made once, so that tracing off
// costs a call nothing but a few comparisons.
var (
	off     trace.Tracer = noop.NewTracerProvider().Tracer(Scope)
	offSpan trace.Span   = noop.Span{}
)

// Enabled reports whether spans are exported.
func (t *Tracing) Enabled() bool { return t != nil }

// Tracer is the scheduler's tracer: OpenTelemetry's no-op one when tracing is off.
func (t *Tracing) Tracer() trace.Tracer {
	if t == nil {
		return off
	}
	return t.tracer
}

// Shutdown exports the spans still buffered and stops the exporter; ctx bounds the wait.
func (t *Tracing) Shutdown(ctx context.Context) error {
	if t == nil {
		return nil
	}
	return t.provider.Shutdown(ctx)
}

// StartChild starts a span under ctx's span, from the provider that made it: code below the engine
// (an HTTP attempt, a SQL target's statements) traces exactly when the run it serves does,
// without a tracer of its own. Under no span, or a span of tracing off, it is a no-op span.
func StartChild(ctx context.Context, name string, opts ...trace.SpanStartOption) (context.Context, trace.Span) {
	parent := trace.SpanFromContext(ctx)
	if !traced(parent) {
		return ctx, offSpan
	}
	return parent.TracerProvider().Tracer(Scope).Start(ctx, name, opts...)
}

// traced reports whether span was made by the SDK, sampled or not: while tracing is on. A
// span of tracing off, or a context that only carries a remote parent (a manual trigger's
// traceparent, read while tracing is off) is not, and hands nothing on.
func traced(span trace.Span) bool {
	_, sdk := span.TracerProvider().(*sdktrace.TracerProvider)
	return sdk && span.SpanContext().IsValid()
}

// traceContext is the W3C Trace Context propagator: traceparent and tracestate.
var traceContext = propagation.TraceContext{}

// Inject sets h's traceparent (and tracestate) to ctx's span, sampled or not, so that the
// target follows the scheduler's sampling decision; a call made while tracing is off carries
// none.
func Inject(ctx context.Context, h http.Header) {
	if traced(trace.SpanFromContext(ctx)) {
		traceContext.Inject(ctx, propagation.HeaderCarrier(h))
	}
}

// Traceparent is the request's W3C traceparent, checked and in its canonical form, or "" when
// it has none or one that does not parse. It is what a manual trigger stores with its run.
func Traceparent(h http.Header) string {
	ctx := traceContext.Extract(context.Background(), propagation.HeaderCarrier(h))
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() {
		return ""
	}
	out := http.Header{}
	traceContext.Inject(trace.ContextWithRemoteSpanContext(context.Background(), sc.WithTraceState(trace.TraceState{})),
		propagation.HeaderCarrier(out))
	return out.Get("traceparent")
}

// WithRemoteParent is ctx under the span a stored traceparent names (Traceparent), for a span
// started in it to join that trace; ctx when traceparent is "" or does not parse.
func WithRemoteParent(ctx context.Context, traceparent string) context.Context {
	if traceparent == "" {
		return ctx
	}
	sc := trace.SpanContextFromContext(traceContext.Extract(ctx, propagation.HeaderCarrier{"Traceparent": {traceparent}}))
	if !sc.IsValid() {
		return ctx
	}
	return trace.ContextWithRemoteSpanContext(ctx, sc)
}

// LogAttrs are the trace_id and span_id of ctx's span for a logger's With, or nil while
// tracing is off.
func LogAttrs(ctx context.Context) []any {
	span := trace.SpanFromContext(ctx)
	if !traced(span) {
		return nil
	}
	sc := span.SpanContext()
	return []any{"trace_id", sc.TraceID().String(), "span_id", sc.SpanID().String()}
}
