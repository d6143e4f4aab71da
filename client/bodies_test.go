package client

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"
)

// The request bodies are the API's own types (the API decodes into them), and encode as
// the maps they replaced did, byte for byte: an Idempotency-Key's retry from an older
// client hashes the same.
func TestRequestBodiesEncodeAsBefore(t *testing.T) {
	t.Parallel()
	var body string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		body = string(b)
		_, _ = w.Write([]byte("{}"))
	}))
	defer srv.Close()
	c := New(srv.URL)
	cases := []struct {
		name string
		call func(context.Context) error
		want string
	}{
		{"trigger, empty", func(ctx context.Context) error { _, err := c.TriggerRun(ctx, "j", TriggerOptions{}); return err }, `{}`},
		{"trigger", func(ctx context.Context) error {
			_, err := c.TriggerRun(ctx, "j", TriggerOptions{Reason: "r <1>", Params: map[string]any{"vars": map[string]any{"b": 1, "a": "<x>"}}})
			return err
		}, `{"params":{"vars":{"a":"\u003cx\u003e","b":1}},"reason":"r \u003c1\u003e"}`},
		{"trigger, empty params", func(ctx context.Context) error {
			_, err := c.TriggerRun(ctx, "j", TriggerOptions{Params: map[string]any{}})
			return err
		}, `{"params":{}}`},
		{"secret", func(ctx context.Context) error { _, err := c.PutSecret(ctx, "S", "v", []string{"h"}); return err },
			`{"allowed_hosts":["h"],"value":"v"}`},
		{"secret, no hosts", func(ctx context.Context) error { _, err := c.PutSecret(ctx, "S", "v", nil); return err },
			`{"allowed_hosts":null,"value":"v"}`},
		{"reason", func(ctx context.Context) error { _, err := c.PauseJob(ctx, "j", "r"); return err }, `{"reason":"r"}`},
		{"no reason", func(ctx context.Context) error { _, err := c.PauseJob(ctx, "j", ""); return err }, ``},
	}
	for _, tc := range cases {
		body = "unset"
		require.NoError(t, tc.call(t.Context()), tc.name)
		require.Equal(t, tc.want, body, tc.name)
	}
}

// A trigger's params that cannot be encoded fail before any call, as any body does.
func TestTriggerParamsNotEncodable(t *testing.T) {
	t.Parallel()
	tr, err := New("http://127.0.0.1:1").TriggerRun(t.Context(), "j", TriggerOptions{Params: map[string]any{"c": make(chan int)}})
	require.ErrorContains(t, err, "encode POST /v1/jobs/j/runs: json: unsupported type: chan int")
	require.NotNil(t, tr)
}
