package targets

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// loopbackCaller calls httptest servers, which listen on 127.0.0.1: refused by default.
func loopbackCaller(t *testing.T, c Config) *Caller {
	t.Helper()
	c.Guard = mustGuard(t, "127.0.0.1/32")
	return NewCaller(c)
}

func serve(t *testing.T, h http.HandlerFunc) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv
}

// statuses answers each request with the next status of the list, repeating the last one.
func statuses(calls *atomic.Int32, codes ...int) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		n := int(calls.Add(1))
		w.WriteHeader(codes[min(n, len(codes))-1])
	}
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

var fastRetry = RetryPolicy{MaxAttempts: 3, InitialBackoff: time.Millisecond, MaxBackoff: 2 * time.Millisecond}

func hmacSignature(key []byte, id, timestamp string, body []byte) string {
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(id + "." + timestamp + "."))
	mac.Write(body)
	return "v1," + base64.StdEncoding.EncodeToString(mac.Sum(nil))
}

func TestReservedHeadersAreSentAndStableAcrossRetries(t *testing.T) {
	var (
		mu    sync.Mutex
		seen  []http.Header
		calls atomic.Int32
	)
	codes := statuses(&calls, 503, 503, 200)
	srv := serve(t, func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.Header.Clone())
		mu.Unlock()
		codes(w, r)
	})
	key := []byte("per-job signing key")
	body := []byte(`{"hello":"world"}`)
	slot := time.Date(2026, 3, 1, 10, 0, 0, 0, time.FixedZone("CET", 3600))
	start := time.Now().Unix()

	res := loopbackCaller(t, Config{}).Do(testCtx(t), Request{
		Method: http.MethodPost, URL: srv.URL + "/hook", Body: body,
		Header: http.Header{
			"Idempotency-Key": {"forged"}, "user-agent": {"forged"}, "webhook-signature": {"forged"},
			"X-Scheduler-Scheduled-At": {"forged"}, "Authorization": {"Bearer t"},
		},
		IdempotencyKey: "job-7:2026-03-01T09:00:00Z", RunID: 42, ScheduledAt: slot, SigningKey: key, Retry: fastRetry,
	})
	require.NoError(t, res.Err)
	require.Len(t, seen, 3)
	require.Len(t, res.Attempts, 3)
	for i, h := range seen {
		n := strconv.Itoa(i + 1)
		assert.Equal(t, []string{"job-7:2026-03-01T09:00:00Z"}, h.Values("Idempotency-Key"), "attempt %s", n)
		assert.Equal(t, []string{"job-7:2026-03-01T09:00:00Z"}, h.Values("Webhook-Id"), "attempt %s", n)
		assert.Equal(t, []string{"42"}, h.Values("X-Scheduler-Run-Id"))
		assert.Equal(t, []string{"2026-03-01T09:00:00Z"}, h.Values("X-Scheduler-Scheduled-At"))
		assert.Equal(t, []string{n}, h.Values("X-Scheduler-Attempt"))
		assert.Equal(t, []string{"scheduler"}, h.Values("User-Agent"))
		assert.Equal(t, "Bearer t", h.Get("Authorization"), "the user's own headers pass")
		ts, err := strconv.ParseInt(h.Get("Webhook-Timestamp"), 10, 64)
		require.NoError(t, err)
		assert.InDelta(t, start, ts, 5)
		assert.Equal(t, []string{hmacSignature(key, h.Get("Webhook-Id"), h.Get("Webhook-Timestamp"), body)},
			h.Values("Webhook-Signature"))
	}
	for i, a := range res.Attempts {
		assert.Equal(t, i+1, a.Number)
		assert.False(t, a.StartedAt.IsZero())
	}
	assert.Equal(t, "status 503 is not a success status", res.Attempts[0].Error)
	assert.True(t, res.Attempts[0].Retryable)
	assert.Equal(t, 200, res.Attempts[2].StatusCode)
	assert.Empty(t, res.Attempts[2].Error)
}

func TestManualUnsignedRunOmitsScheduledAtAndSignature(t *testing.T) {
	got := make(chan http.Header, 1)
	srv := serve(t, func(w http.ResponseWriter, r *http.Request) { got <- r.Header.Clone() })
	res := loopbackCaller(t, Config{}).Do(testCtx(t), Request{URL: srv.URL, IdempotencyKey: "manual-1", RunID: 1})
	require.NoError(t, res.Err)
	h := <-got
	assert.Empty(t, h.Values("X-Scheduler-Scheduled-At"))
	assert.Empty(t, h.Values("Webhook-Signature"))
	assert.Equal(t, "manual-1", h.Get("Webhook-Id"))
	assert.NotEmpty(t, h.Get("Webhook-Timestamp"))
}

func TestSignatureMatchesTheStandardWebhooksVector(t *testing.T) {
	key := SignatureKey("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
	assert.Equal(t, "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=",
		Sign(key, "msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330, []byte(`{"test": 2432232314}`)))
	assert.Equal(t, []byte("plain secret"), SignatureKey("plain secret"))
	assert.Equal(t, []byte("whsec_not base64!"), SignatureKey("whsec_not base64!"))
}

func TestWhsecKeySignatureVerifiesAtTheReceiver(t *testing.T) {
	raw := []byte("0123456789abcdef0123456789abcdef")
	verified := make(chan bool, 1)
	srv := serve(t, func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		want := hmacSignature(raw, r.Header.Get("Webhook-Id"), r.Header.Get("Webhook-Timestamp"), body)
		verified <- hmac.Equal([]byte(want), []byte(r.Header.Get("Webhook-Signature")))
	})
	res := loopbackCaller(t, Config{}).Do(testCtx(t), Request{
		Method: http.MethodPost, URL: srv.URL, Body: []byte("payload"), IdempotencyKey: "k",
		SigningKey: SignatureKey("whsec_" + base64.StdEncoding.EncodeToString(raw)),
	})
	require.NoError(t, res.Err)
	assert.True(t, <-verified)
}

func TestRetriesOnlyNetworkErrorsTimeoutsAnd408And429And5xx(t *testing.T) {
	c := loopbackCaller(t, Config{})
	for code, wantCalls := range map[int]int32{400: 1, 401: 1, 404: 1, 409: 1, 422: 1, 408: 3, 429: 3, 500: 3, 502: 3, 503: 3} {
		var calls atomic.Int32
		srv := serve(t, statuses(&calls, code))
		res := c.Do(testCtx(t), Request{URL: srv.URL, Retry: fastRetry})
		assert.Equal(t, wantCalls, calls.Load(), "status %d", code)
		assert.Len(t, res.Attempts, int(wantCalls))
		if wantCalls == 1 {
			assert.EqualError(t, res.Err, "failed after 1 attempt, not retryable: status "+strconv.Itoa(code)+" is not a success status")
		} else {
			assert.EqualError(t, res.Err, "failed after 3 attempts: status "+strconv.Itoa(code)+" is not a success status")
		}
	}

	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	require.NoError(t, err)
	closedPort := ln.Addr().String()
	ln.Close()
	res := c.Do(testCtx(t), Request{URL: "http://" + closedPort + "/", Retry: fastRetry})
	require.Len(t, res.Attempts, 3)
	assert.Equal(t, "connection refused", res.Attempts[0].Error)
	assert.True(t, res.Attempts[0].Retryable)
	assert.EqualError(t, res.Err, "failed after 3 attempts: connection refused")
}

func TestRetryAfterIsHonouredWhenLongerThanTheBackoff(t *testing.T) {
	var mu sync.Mutex
	var at []time.Time
	srv := serve(t, func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		at = append(at, time.Now())
		if len(at) == 1 {
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(http.StatusTooManyRequests)
		}
	})
	res := loopbackCaller(t, Config{}).Do(testCtx(t), Request{URL: srv.URL, Retry: fastRetry})
	require.NoError(t, res.Err)
	require.Len(t, at, 2)
	assert.GreaterOrEqual(t, at[1].Sub(at[0]), time.Second)
}

func TestDeadlineStopsRetries(t *testing.T) {
	var calls atomic.Int32
	srv := serve(t, statuses(&calls, 503))
	c := loopbackCaller(t, Config{})

	start := time.Now()
	res := c.Do(testCtx(t), Request{URL: srv.URL, Deadline: start.Add(50 * time.Millisecond),
		Retry: RetryPolicy{MaxAttempts: 5, InitialBackoff: 200 * time.Millisecond, MaxBackoff: 200 * time.Millisecond}})
	require.Len(t, res.Attempts, 1)
	assert.ErrorContains(t, res.Err, "gave up after 1 attempt: the next attempt would start after the run's deadline")
	assert.ErrorContains(t, res.Err, "last: status 503 is not a success status")
	assert.Less(t, time.Since(start), time.Second, "no sleep towards a retry that cannot happen")

	srv429 := serve(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Retry-After", "120")
		w.WriteHeader(http.StatusServiceUnavailable)
	})
	res = c.Do(testCtx(t), Request{URL: srv429.URL, Deadline: time.Now().Add(5 * time.Second), Retry: fastRetry})
	require.Len(t, res.Attempts, 1)
	assert.ErrorContains(t, res.Err, "gave up after 1 attempt")

	// A run that starts after its deadline (a catch-up late in its period) still calls once.
	calls.Store(0)
	res = c.Do(testCtx(t), Request{URL: srv.URL, Deadline: time.Now().Add(-time.Second), Retry: fastRetry})
	assert.Len(t, res.Attempts, 1)
	assert.Equal(t, int32(1), calls.Load())
	assert.ErrorContains(t, res.Err, "gave up after 1 attempt: the next attempt would start after the run's deadline")
}

func TestSuccessStatusesAreThoseListed(t *testing.T) {
	c := loopbackCaller(t, Config{})
	var calls atomic.Int32
	ok := serve(t, statuses(&calls, 200))
	res := c.Do(testCtx(t), Request{URL: ok.URL, Success: []int{202}, Retry: fastRetry})
	assert.EqualError(t, res.Err, "failed after 1 attempt, not retryable: status 200 is not a success status")

	gone := serve(t, statuses(&calls, 404))
	assert.NoError(t, c.Do(testCtx(t), Request{URL: gone.URL, Success: []int{404, 410}}).Err)
	unavailable := serve(t, statuses(&calls, 503))
	assert.NoError(t, c.Do(testCtx(t), Request{URL: unavailable.URL, Success: []int{503}}).Err)
}

func TestRedirectIsNotFollowed(t *testing.T) {
	var targetCalls atomic.Int32
	target := serve(t, statuses(&targetCalls, 200))
	redirecting := serve(t, func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, target.URL+"/landing", http.StatusFound)
	})
	res := loopbackCaller(t, Config{}).Do(testCtx(t), Request{URL: redirecting.URL, Retry: fastRetry})
	require.Len(t, res.Attempts, 1)
	assert.Equal(t, http.StatusFound, res.Attempts[0].StatusCode)
	assert.Equal(t, "redirect to "+target.URL+"/landing not followed", res.Attempts[0].Error)
	assert.False(t, res.Attempts[0].Retryable)
	assert.Zero(t, targetCalls.Load(), "the redirect target was called")
}

func TestDefaultGuardRefusesInternalTargetsWithoutCalling(t *testing.T) {
	var calls atomic.Int32
	srv := serve(t, statuses(&calls, 200))
	port := srv.Listener.Addr().(*net.TCPAddr).Port
	c := NewCaller(Config{}) // no allow list
	for _, url := range []string{
		srv.URL, "http://10.0.0.1/", "http://169.254.169.254/latest/meta-data/", "http://[::1]:" + strconv.Itoa(port) + "/",
		"http://localhost:" + strconv.Itoa(port) + "/", "http://[::ffff:127.0.0.1]:" + strconv.Itoa(port) + "/",
	} {
		res := c.Do(testCtx(t), Request{URL: url, Retry: fastRetry})
		assert.Empty(t, res.Attempts, url)
		assert.ErrorContains(t, res.Err, "not attempted: url host", url)
	}
	assert.Zero(t, calls.Load())

	wide := NewCaller(Config{Guard: mustGuard(t, "0.0.0.0/0")})
	res := wide.Do(testCtx(t), Request{URL: "http://169.254.169.254/latest/meta-data/"})
	assert.EqualError(t, res.Err, "not attempted: url host 169.254.169.254 is a cloud metadata address, which is never allowed")

	// A name that passes the static check but resolves to loopback is refused when dialled.
	g := mustGuard(t)
	g.lookup = func(context.Context, string, string) ([]netip.Addr, error) {
		return []netip.Addr{netip.MustParseAddr("127.0.0.1")}, nil
	}
	res = NewCaller(Config{Guard: g}).Do(testCtx(t), Request{URL: "http://receiver.example:" + strconv.Itoa(port) + "/", Retry: fastRetry})
	require.Len(t, res.Attempts, 1)
	assert.Equal(t, "refused: receiver.example resolves to 127.0.0.1, a loopback address", res.Attempts[0].Error)
	assert.False(t, res.Attempts[0].Retryable)
	assert.Zero(t, res.Attempts[0].StatusCode)
	assert.Zero(t, calls.Load())
}

func TestResponseBodyKeepsFourKiBOfValidUTF8(t *testing.T) {
	c := loopbackCaller(t, Config{})
	long := strings.Repeat("a", keptBodyBytes-1) + "é" + strings.Repeat("b", 2<<20)
	for body, want := range map[string]string{
		long:            strings.Repeat("a", keptBodyBytes-1),
		"ok\xff\xfeok":  "ok\uFFFDok",
		"short":         "short",
		"cut rune \xe2": "cut rune ",
	} {
		srv := serve(t, func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, body) })
		res := c.Do(testCtx(t), Request{URL: srv.URL})
		require.NoError(t, res.Err)
		assert.Equal(t, want, res.Attempts[0].Body)
		assert.True(t, utf8.ValidString(res.Attempts[0].Body))
	}
	assert.LessOrEqual(t, len(cleanUTF8([]byte(strings.Repeat("\xffa", keptBodyBytes/2)))), keptBodyBytes)
}

func TestConcurrencyBoundsHold(t *testing.T) {
	for name, cfg := range map[string]Config{
		"per host": {Concurrency: 100, HostConcurrency: 2},
		"global":   {Concurrency: 1, HostConcurrency: 50},
	} {
		t.Run(name, func(t *testing.T) {
			bound := int32(min(cfg.Concurrency, cfg.HostConcurrency))
			const calls = 6
			var inFlight, most atomic.Int32
			entered, release := make(chan struct{}, calls), make(chan struct{})
			srv := serve(t, func(w http.ResponseWriter, r *http.Request) {
				n := inFlight.Add(1)
				defer inFlight.Add(-1)
				for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
				}
				entered <- struct{}{}
				select {
				case <-release:
				case <-time.After(5 * time.Second):
				}
			})
			c := loopbackCaller(t, cfg)
			ctx, done := testCtx(t), make(chan error, calls)
			for range calls {
				go func() { done <- c.Do(ctx, Request{URL: srv.URL}).Err }()
			}
			for range bound {
				select {
				case <-entered:
				case <-time.After(5 * time.Second):
					t.Fatal("no call reached the server")
				}
			}
			require.Eventually(t, func() bool { return c.Waiting() == calls-int64(bound) }, 5*time.Second, time.Millisecond)
			assert.True(t, c.Queued(), "calls queue for the replica's bounds")
			close(release)
			for range calls {
				select {
				case err := <-done:
					assert.NoError(t, err)
				case <-time.After(5 * time.Second):
					t.Fatal("a call did not finish")
				}
			}
			assert.LessOrEqual(t, most.Load(), bound)
			assert.Zero(t, c.Waiting())
			assert.False(t, c.Queued())
		})
	}
}

func TestCancellationStopsAtOnce(t *testing.T) {
	entered := make(chan struct{}, 1)
	hanging := serve(t, func(w http.ResponseWriter, r *http.Request) {
		entered <- struct{}{}
		select {
		case <-r.Context().Done():
		case <-time.After(5 * time.Second):
		}
	})
	c := loopbackCaller(t, Config{})
	ctx, cancel := context.WithCancel(testCtx(t))
	go func() { <-entered; cancel() }()
	start := time.Now()
	res := c.Do(ctx, Request{URL: hanging.URL, Retry: fastRetry})
	assert.ErrorIs(t, res.Err, context.Canceled)
	assert.EqualError(t, res.Err, "stopped after 1 attempt: context canceled")
	require.Len(t, res.Attempts, 1)
	assert.Equal(t, "stopped: context canceled", res.Attempts[0].Error)
	assert.Less(t, time.Since(start), 2*time.Second)

	var calls atomic.Int32
	failing := serve(t, statuses(&calls, 503))
	ctx, cancel = context.WithCancel(testCtx(t))
	start = time.Now()
	res = c.Do(ctx, Request{URL: failing.URL, OnAttempt: func(Attempt) { cancel() },
		Retry: RetryPolicy{MaxAttempts: 3, InitialBackoff: time.Hour, MaxBackoff: time.Hour}})
	assert.ErrorIs(t, res.Err, context.Canceled)
	assert.Len(t, res.Attempts, 1)
	assert.Less(t, time.Since(start), 2*time.Second, "the backoff sleep ends with the run")
}

func TestAttemptTimeoutCoversHeadersAndBody(t *testing.T) {
	stalled := func(writeHeader bool) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			if writeHeader {
				w.WriteHeader(http.StatusOK)
				w.(http.Flusher).Flush()
			}
			select {
			case <-r.Context().Done():
			case <-time.After(5 * time.Second):
			}
		}
	}
	c := loopbackCaller(t, Config{})
	res := c.Do(testCtx(t), Request{URL: serve(t, stalled(false)).URL, AttemptTimeout: 100 * time.Millisecond})
	require.Len(t, res.Attempts, 1)
	assert.Equal(t, "timed out after 100ms", res.Attempts[0].Error)
	assert.True(t, res.Attempts[0].Retryable)

	res = c.Do(testCtx(t), Request{URL: serve(t, stalled(true)).URL, AttemptTimeout: 100 * time.Millisecond})
	require.Len(t, res.Attempts, 1)
	assert.Equal(t, 200, res.Attempts[0].StatusCode)
	assert.Equal(t, "timed out after 100ms while reading the response body", res.Attempts[0].Error)
}

func TestOnCallIsToldOfEveryAttempt(t *testing.T) {
	type call struct{ host, class string }
	var mu sync.Mutex
	var got []call
	c := loopbackCaller(t, Config{OnCall: func(host, class string, d time.Duration) {
		mu.Lock()
		defer mu.Unlock()
		got = append(got, call{host, class})
		assert.Positive(t, d)
	}})
	var calls atomic.Int32
	srv := serve(t, statuses(&calls, 503, 404))
	c.Do(testCtx(t), Request{URL: srv.URL, Retry: fastRetry})
	assert.Equal(t, []call{{"127.0.0.1", "5xx"}, {"127.0.0.1", "4xx"}}, got)
}

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for v, want := range map[string]time.Duration{
		"1": time.Second, " 120 ": 2 * time.Minute, "-5": 0, "": 0, "soon": 0,
		"Thu, 01 Jan 2026 00:00:10 GMT": 10 * time.Second, "Wed, 31 Dec 2025 23:59:00 GMT": 0,
		"99999999999999": 365 * 24 * time.Hour,
	} {
		assert.Equal(t, want, parseRetryAfter(v, now), v)
	}
}

// One job's slow target must not hold the whole outbound bound for its timeout: a job holds
// at most JobConcurrency slots, so another job's call still goes out (issue 28, 6).
func TestOneJobHoldsAtMostItsShareOfTheCalls(t *testing.T) {
	t.Parallel()
	arrived := make(chan string, 16)
	release := make(chan struct{})
	var once sync.Once
	releaseAll := func() { once.Do(func() { close(release) }) }
	srv := serve(t, func(w http.ResponseWriter, r *http.Request) {
		arrived <- r.URL.Query().Get("job")
		<-release
	})
	t.Cleanup(releaseAll) // before the server's Close, which waits for the handlers
	c := loopbackCaller(t, Config{Concurrency: 4, HostConcurrency: 64, JobConcurrency: 2})
	ctx := testCtx(t)
	var wg sync.WaitGroup
	call := func(job string) {
		wg.Go(func() { c.Do(ctx, Request{Job: job, Method: "GET", URL: srv.URL + "/?job=" + job}) })
	}
	for range 4 {
		call("slow")
	}
	for range 2 {
		assert.Equal(t, "slow", receive(t, arrived, "the slow job's calls to arrive"))
	}
	require.Eventually(t, func() bool { return c.Waiting() == 2 }, 5*time.Second, time.Millisecond)
	assert.False(t, c.Queued(), "a job's own bound is the job's: its waits are no queue for the replica's bounds")
	call("other")
	got := receive(t, arrived, "another job's call to go out while the slow job's calls hang")
	assert.Equal(t, "other", got, "the slow job had more than its share of the slots")
	releaseAll()
	wg.Wait()
	assert.Len(t, arrived, 2, "the slow job's other calls went out once the first ended")
}

func receive(t *testing.T, ch <-chan string, what string) string {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(5 * time.Second):
		t.Fatalf("waited 5s for %s", what)
		return ""
	}
}
