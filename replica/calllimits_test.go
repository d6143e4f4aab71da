package replica

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schedulerhq/scheduler/internal/store"
	"github.com/schedulerhq/scheduler/internal/targets"
	"github.com/schedulerhq/scheduler/internal/testdb"
	"github.com/schedulerhq/scheduler/internal/testsignal"
)

// TestMain is backfill_test.go's: one per test binary, internal and external tests together.

// An admin's change to a namespace's max_concurrent_calls applies within a poll interval,
// without a restart: a call waiting at the old bound goes out once the row is raised.
func TestNamespaceCallLimitChangeAppliesWithinSeconds(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	db, _ := testdb.Open(t, store.Options{})
	one := 1
	_, _, err := db.PutNamespace(ctx, store.Namespace{Name: "billing", MaxConcurrentCalls: &one})
	require.NoError(t, err)

	arrived, release := make(chan struct{}, 4), make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		arrived <- struct{}{}
		<-release
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(release) }) // before the server's Close, which waits for the handlers
	g, err := targets.NewGuard([]string{"127.0.0.1/32"})
	require.NoError(t, err)
	caller := targets.NewCaller(targets.Config{Guard: g})
	var refreshed testsignal.Signal[int]
	refreshed.Init()
	limits := callLimits{db: db.DB, caller: caller, every: 50 * time.Millisecond, refreshed: &refreshed}
	limits.refresh(ctx)
	assert.Equal(t, 1, refreshed.Await(t, 10*time.Second, "the first read of the bounds"), "billing has a bound")
	done := make(chan struct{})
	go func() { defer close(done); limits.run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })

	for range 2 {
		go caller.Do(ctx, targets.Request{Namespace: "billing", URL: srv.URL})
	}
	await := func(what string) {
		select {
		case <-arrived:
		case <-time.After(10 * time.Second):
			t.Fatalf("waited 10 s for %s", what)
		}
	}
	await("the first call")
	require.Eventually(t, func() bool { return caller.Waiting() == 1 }, 10*time.Second, time.Millisecond, "the second call waits at the bound")
	select {
	case <-arrived:
		t.Fatal("a second call went out beyond max_concurrent_calls 1")
	default:
	}

	two := 2
	_, _, err = db.PutNamespace(ctx, store.Namespace{Name: "billing", MaxConcurrentCalls: &two})
	require.NoError(t, err)
	for len(refreshed.C()) > 0 { // the passes before the change
		<-refreshed.C()
	}
	// The second pass from here read after the change; the first may have read before it.
	for range 2 {
		refreshed.Await(t, 10*time.Second, "a read of the bounds after the change")
	}
	await("the waiting call, once the bound was raised in the database")
	assert.Zero(t, caller.Waiting())
}
