package targets

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A namespace's calls in flight stay within its max_concurrent_calls, whatever its jobs; a
// call that waits past its run's deadline fails saying so; other namespaces are not held
// up; and a raised bound lets the waiting calls through at once.
func TestNamespaceBoundsItsCallsInFlight(t *testing.T) {
	t.Parallel()
	var inFlight, most atomic.Int32
	arrived := make(chan string, 32)
	release := make(chan struct{})
	var once sync.Once
	releaseAll := func() { once.Do(func() { close(release) }) }
	srv := serve(t, func(w http.ResponseWriter, r *http.Request) {
		ns := r.URL.Query().Get("ns")
		if ns == "billing" {
			n := inFlight.Add(1)
			defer inFlight.Add(-1)
			for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
			}
		}
		arrived <- ns
		select {
		case <-release:
		case <-time.After(10 * time.Second):
		}
	})
	t.Cleanup(releaseAll)
	c := loopbackCaller(t, Config{})
	c.SetNamespaceLimits(map[string]int{"billing": 2})
	ctx := testCtx(t)

	const calls = 6
	done := make(chan error, calls)
	for i := range calls {
		job := []string{"a", "b", "c"}[i%3] // the bound is the namespace's, across its jobs
		go func() {
			done <- c.Do(ctx, Request{Job: job, Namespace: "billing", URL: srv.URL + "/?ns=billing"}).Err
		}()
	}
	for range 2 {
		assert.Equal(t, "billing", receive(t, arrived, "billing's first two calls"))
	}
	require.Eventually(t, func() bool { return c.Waiting() == calls-2 }, 5*time.Second, time.Millisecond,
		"the other calls wait for a slot of the namespace")
	assert.False(t, c.Queued(), "a namespace's own bound is the namespace's: its waits are no queue for the replica's bounds")

	go func() { done <- c.Do(ctx, Request{Namespace: "ops", URL: srv.URL + "/?ns=ops"}).Err }()
	assert.Equal(t, "ops", receive(t, arrived, "another namespace's call while billing's hang"))

	start := time.Now()
	res := c.Do(ctx, Request{Job: "late", Namespace: "billing", URL: srv.URL + "/?ns=billing", Deadline: time.Now().Add(200 * time.Millisecond)})
	require.Error(t, res.Err)
	assert.Contains(t, res.Err.Error(), "namespace billing's max_concurrent_calls (2) was reached")
	assert.Empty(t, res.Attempts, "nothing was sent")
	var qe *QuotaError
	assert.True(t, errors.As(res.Err, &qe))
	assert.Less(t, time.Since(start), 5*time.Second, "it gave up at its deadline")

	c.SetNamespaceLimits(map[string]int{"billing": 4})
	for range 2 {
		assert.Equal(t, "billing", receive(t, arrived, "the calls a raised bound lets through"))
	}
	releaseAll()
	for range calls + 1 {
		select {
		case err := <-done:
			assert.NoError(t, err)
		case <-time.After(10 * time.Second):
			t.Fatal("a call did not finish")
		}
	}
	assert.LessOrEqual(t, most.Load(), int32(4))
	assert.Zero(t, c.Waiting())
}

// A run's timeout that ends the wait is reported as the namespace's bound, not as a bare
// context error.
func TestNamespaceWaitEndedByTheRunsTimeoutSaysWhy(t *testing.T) {
	t.Parallel()
	hold := make(chan struct{})
	srv := serve(t, func(w http.ResponseWriter, r *http.Request) { <-hold })
	t.Cleanup(func() { close(hold) })
	c := loopbackCaller(t, Config{})
	c.SetNamespaceLimits(map[string]int{"billing": 1})
	go c.Do(testCtx(t), Request{Namespace: "billing", URL: srv.URL})
	require.Eventually(t, func() bool {
		c.slots.mu.Lock()
		defer c.slots.mu.Unlock()
		return c.slots.inUse["billing"] == 1
	}, 5*time.Second, time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	res := c.Do(ctx, Request{Namespace: "billing", URL: srv.URL})
	require.Error(t, res.Err)
	assert.Contains(t, res.Err.Error(), "max_concurrent_calls (1) was reached")
	assert.ErrorIs(t, res.Err, context.DeadlineExceeded)
}
