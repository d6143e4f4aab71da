package targets

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// StatusClass is the one name of an attempt's outcome: a run's stats detail and the
// scheduler_target_calls_total label both use it, so they cannot disagree again (issue 30:
// "no_answer" against "error").
func TestStatusClass(t *testing.T) {
	for code, want := range map[int]string{
		0: NoAnswer, 99: NoAnswer, 600: NoAnswer, 999: NoAnswer,
		100: "1xx", 200: "2xx", 204: "2xx", 302: "3xx", 404: "4xx", 429: "4xx", 500: "5xx", 599: "5xx",
	} {
		assert.Equal(t, want, StatusClass(code), "status %d", code)
	}
	assert.Equal(t, "error", NoAnswer, "the class operations.md documents for no answer")
}

// The caller tells OnCall the StatusClass of each attempt: an answer's class, and NoAnswer
// for an attempt that got none.
func TestCallerReportsStatusClass(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusNotFound)
	}))
	t.Cleanup(srv.Close)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	closed := "http://" + l.Addr().String()
	require.NoError(t, l.Close()) // nothing listens: connection refused

	g, err := NewGuard([]string{"127.0.0.1/32"})
	require.NoError(t, err)
	var mu sync.Mutex
	var classes []string
	c := NewCaller(Config{Guard: g, OnCall: func(_, class string, _ time.Duration) {
		mu.Lock()
		defer mu.Unlock()
		classes = append(classes, class)
	}})
	for _, u := range []string{srv.URL, closed} {
		res := c.Do(context.Background(), Request{Job: "j", Method: http.MethodGet, URL: u, IdempotencyKey: "k"})
		require.Len(t, res.Attempts, 1)
		assert.Equal(t, StatusClass(res.Attempts[0].StatusCode), classes[len(classes)-1])
	}
	assert.Equal(t, []string{"4xx", NoAnswer}, classes)
}
