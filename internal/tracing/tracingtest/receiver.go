// Package tracingtest is an OTLP/HTTP trace receiver for tests: what a collector gets from a
// replica over the wire (protobuf on /v1/traces), decoded, so that tests see the spans the
// exporter really sends rather than what an in-process stub was handed.
package tracingtest

import (
	"compress/gzip"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	coltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	"google.golang.org/protobuf/proto"
)

// Span is a span as received.
type Span struct {
	Name                          string
	TraceID, SpanID, ParentSpanID string // hex; ParentSpanID "" for a root
	Kind                          string // "internal", "client", ...
	Attrs                         map[string]string
	Links                         []Link
	Error                         bool   // status code ERROR
	Service                       string // the resource's service.name
	Start, End                    time.Time
}

// Link is a span's link to another span.
type Link struct{ TraceID, SpanID string }

// Receiver is a running OTLP/HTTP receiver; its URL is what OTEL_EXPORTER_OTLP_ENDPOINT names.
type Receiver struct {
	URL string

	mu       sync.Mutex
	spans    []Span
	requests int
	arrived  chan struct{}
}

// Start starts a receiver that stops with the test.
func Start(t testing.TB) *Receiver {
	r := &Receiver{arrived: make(chan struct{}, 1)}
	srv := httptest.NewServer(http.HandlerFunc(r.serve))
	t.Cleanup(srv.Close)
	r.URL = srv.URL
	return r
}

func (r *Receiver) serve(w http.ResponseWriter, req *http.Request) {
	if req.URL.Path != "/v1/traces" || req.Method != http.MethodPost {
		http.NotFound(w, req)
		return
	}
	var body io.Reader = req.Body
	if req.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(req.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		body = zr
	}
	raw, err := io.ReadAll(body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var export coltrace.ExportTraceServiceRequest
	if err := proto.Unmarshal(raw, &export); err != nil {
		http.Error(w, "not an OTLP protobuf export: "+err.Error(), http.StatusBadRequest)
		return
	}
	var got []Span
	for _, rs := range export.ResourceSpans {
		service := attrs(rs.GetResource().GetAttributes())["service.name"]
		for _, ss := range rs.ScopeSpans {
			for _, s := range ss.Spans {
				sp := Span{Name: s.Name, TraceID: hex.EncodeToString(s.TraceId), SpanID: hex.EncodeToString(s.SpanId),
					ParentSpanID: hex.EncodeToString(s.ParentSpanId), Attrs: attrs(s.Attributes), Service: service,
					Error: s.GetStatus().GetCode() == 2, Start: time.Unix(0, int64(s.StartTimeUnixNano)),
					End: time.Unix(0, int64(s.EndTimeUnixNano))}
				switch s.Kind {
				case 1:
					sp.Kind = "internal"
				case 2:
					sp.Kind = "server"
				case 3:
					sp.Kind = "client"
				default:
					sp.Kind = fmt.Sprint(int32(s.Kind))
				}
				for _, l := range s.Links {
					sp.Links = append(sp.Links, Link{TraceID: hex.EncodeToString(l.TraceId), SpanID: hex.EncodeToString(l.SpanId)})
				}
				got = append(got, sp)
			}
		}
	}
	r.mu.Lock()
	r.spans = append(r.spans, got...)
	r.requests++
	r.mu.Unlock()
	select {
	case r.arrived <- struct{}{}:
	default:
	}
	w.Header().Set("Content-Type", "application/x-protobuf")
	b, _ := proto.Marshal(&coltrace.ExportTraceServiceResponse{})
	_, _ = w.Write(b)
}

func attrs(kvs []*commonpb.KeyValue) map[string]string {
	m := make(map[string]string, len(kvs))
	for _, kv := range kvs {
		v := kv.GetValue()
		switch x := v.GetValue().(type) {
		case *commonpb.AnyValue_StringValue:
			m[kv.Key] = x.StringValue
		case *commonpb.AnyValue_IntValue:
			m[kv.Key] = fmt.Sprint(x.IntValue)
		case *commonpb.AnyValue_BoolValue:
			m[kv.Key] = fmt.Sprint(x.BoolValue)
		case *commonpb.AnyValue_DoubleValue:
			m[kv.Key] = fmt.Sprint(x.DoubleValue)
		default:
			m[kv.Key] = v.String()
		}
	}
	return m
}

// Spans are the spans received so far.
func (r *Receiver) Spans() []Span {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Span(nil), r.spans...)
}

// Requests is how many exports arrived.
func (r *Receiver) Requests() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.requests
}

// Await waits until ok holds for the spans received, or fails the test after timeout.
func (r *Receiver) Await(t testing.TB, timeout time.Duration, what string, ok func([]Span) bool) []Span {
	t.Helper()
	deadline := time.After(timeout)
	for {
		if spans := r.Spans(); ok(spans) {
			return spans
		}
		select {
		case <-r.arrived:
		case <-deadline:
			t.Fatalf("tracingtest: %s: not received within %s; got %d spans: %v", what, timeout, len(r.Spans()), names(r.Spans()))
		}
	}
}

func names(spans []Span) []string {
	var out []string
	for _, s := range spans {
		out = append(out, s.Name+"/"+s.TraceID[:8]+"/"+s.SpanID)
	}
	return out
}
