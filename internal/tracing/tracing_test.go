package tracing

import (
	"errors"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schedulerhq/scheduler/internal/config"
)

func lookup(env map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := env[k]; return v, ok }
}

// Off unless an endpoint (or the otlp exporter) is asked for; OTEL_SDK_DISABLED and the none
// exporter win. A value this build cannot honour is a configuration error naming the
// variable, every one at once, rather than traces silently not sent.
func TestEnabledOnlyWhenAnExporterIsAskedFor(t *testing.T) {
	for _, tc := range []struct {
		env map[string]string
		on  bool
	}{
		{nil, false},
		{map[string]string{"OTEL_SERVICE_NAME": "scheduler"}, false},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"}, true},
		{map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://collector:4318/v1/traces"}, true},
		{map[string]string{"OTEL_TRACES_EXPORTER": "otlp"}, true},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318", "OTEL_SDK_DISABLED": "true"}, false},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318", "OTEL_TRACES_EXPORTER": "none"}, false},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318", "OTEL_TRACES_SAMPLER": "parentbased_traceidratio",
			"OTEL_TRACES_SAMPLER_ARG": "0.01"}, true},
	} {
		on, err := enabled(lookup(tc.env))
		require.NoError(t, err, "%v", tc.env)
		assert.Equal(t, tc.on, on, "%v", tc.env)
	}

	_, err := enabled(lookup(map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4317",
		"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc", "OTEL_TRACES_SAMPLER": "ratio", "OTEL_TRACES_EXPORTER": "zipkin",
		"OTEL_SDK_DISABLED": "nope"}))
	require.Error(t, err)
	var cfgErr *config.Error
	assert.True(t, errors.As(err, &cfgErr))
	for _, want := range []string{"OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf", "OTEL_TRACES_SAMPLER", "parentbased_traceidratio",
		"OTEL_TRACES_EXPORTER", "OTEL_SDK_DISABLED"} {
		assert.Contains(t, err.Error(), want)
	}
	_, err = enabled(lookup(map[string]string{"OTEL_TRACES_SAMPLER": "traceidratio", "OTEL_TRACES_SAMPLER_ARG": "5%"}))
	assert.ErrorContains(t, err, "OTEL_TRACES_SAMPLER_ARG")
}

// A trigger's traceparent is kept only when it parses, in its canonical form.
func TestTraceparentIsCheckedAndCanonical(t *testing.T) {
	h := http.Header{}
	assert.Empty(t, Traceparent(h))
	h.Set("Traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
	h.Set("Tracestate", "vendor=x")
	assert.Equal(t, "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", Traceparent(h))
	for _, bad := range []string{"junk", "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
		"00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01; drop table"} {
		h.Set("Traceparent", bad)
		assert.Empty(t, Traceparent(h), bad)
	}
}
