package pglisten

import (
	"context"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schedulerhq/scheduler/internal/store"
	"github.com/schedulerhq/scheduler/internal/testdb"
)

func TestMain(m *testing.M) { testdb.Main(m) }

const waitTimeout = 10 * time.Second

// events collects a subscription's events for a test.
func events(n *Notifier, channel string) (<-chan Event, func()) {
	ch := make(chan Event, 100)
	return ch, n.Listen(channel, func(ev Event) { ch <- ev })
}

func next(t *testing.T, ch <-chan Event, what string) Event {
	t.Helper()
	select {
	case ev := <-ch:
		return ev
	case <-time.After(waitTimeout):
		t.Fatalf("timed out after %s waiting for %s", waitTimeout, what)
		panic("unreachable")
	}
}

func start(t *testing.T) (*Notifier, *testdb.DB) {
	t.Helper()
	db, _ := testdb.Open(t, store.Options{InstanceID: "n"})
	n := New(db.DB, slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError})))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); n.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(waitTimeout):
			t.Errorf("the notifier did not stop within %s", waitTimeout)
		}
	})
	return n, db
}

func notify(t *testing.T, db *testdb.DB, channel, payload string) {
	t.Helper()
	_, err := db.Pool.Exec(context.Background(), `SELECT pg_notify($1, $2)`, channel, payload)
	require.NoError(t, err)
}

// A subscription is told to resync once its channel is listened on, then gets its
// notifications; when the connection is lost (its backend terminated), the notifier
// reconnects, listens again, and tells it to resync, and notifications flow again. Only one
// connection of the replica listens, whatever the number of subscriptions.
func TestResyncAfterReconnect(t *testing.T) {
	t.Parallel()
	n, db := start(t)
	a, unlistenA := events(n, "topic_a")
	defer unlistenA()
	b, unlistenB := events(n, "topic_b")
	defer unlistenB()
	assert.True(t, next(t, a, "a's first resync").Resync)
	assert.True(t, next(t, b, "b's first resync").Resync)
	notify(t, db, "topic_a", "1")
	assert.Equal(t, Event{Payload: "1"}, next(t, a, "a's notification"))
	var listeners int
	require.NoError(t, db.Pool.QueryRow(context.Background(),
		`SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid() AND query LIKE '%LISTEN %'`).Scan(&listeners))
	assert.Equal(t, 1, listeners, "one listening connection")

	_, err := db.Pool.Exec(context.Background(), `SELECT pg_terminate_backend(pid) FROM pg_stat_activity
		WHERE datname = current_database() AND pid <> pg_backend_pid() AND query LIKE '%LISTEN %'`)
	require.NoError(t, err)
	assert.Equal(t, Event{Resync: true}, next(t, a, "a's resync after the reconnection"))
	assert.Equal(t, Event{Resync: true}, next(t, b, "b's resync after the reconnection"))
	notify(t, db, "topic_b", "2")
	assert.Equal(t, Event{Payload: "2"}, next(t, b, "b's notification on the new connection"))
}

// A subscription that ends stops its events; a channel nobody subscribes to any more is no
// longer listened on, and a new subscription to a listened channel is told to resync too.
func TestUnlistenAndLateSubscriber(t *testing.T) {
	t.Parallel()
	n, db := start(t)
	a, unlistenA := events(n, "topic_a")
	assert.True(t, next(t, a, "a's resync").Resync)
	late, unlistenLate := events(n, "topic_a")
	defer unlistenLate()
	assert.True(t, next(t, late, "the late subscriber's resync").Resync)
	unlistenA()
	c, unlistenC := events(n, "topic_c")
	defer unlistenC()
	assert.True(t, next(t, c, "c's resync").Resync)
	notify(t, db, "topic_a", "1")
	notify(t, db, "topic_c", "2")
	// Notifications arrive in commit order: once c has its own, a's would have come.
	assert.Equal(t, Event{Payload: "2"}, next(t, c, "c's notification"))
	assert.Equal(t, Event{Payload: "1"}, next(t, late, "the late subscriber's notification"))
	assert.Empty(t, a, "an ended subscription gets nothing")

	unlistenLate()
	d, unlistenD := events(n, "topic_d")
	defer unlistenD()
	assert.True(t, next(t, d, "d's resync").Resync)
}

// Run returns once its context ends, also when a subscription outlives it.
func TestRunEndsWithItsContext(t *testing.T) {
	t.Parallel()
	db, _ := testdb.Open(t, store.Options{InstanceID: "n"})
	n := New(db.DB, nil)
	ch, unlisten := events(n, "topic_a")
	defer unlisten()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); n.Run(ctx) }()
	assert.True(t, next(t, ch, "the resync").Resync)
	cancel()
	select {
	case <-done:
	case <-time.After(waitTimeout):
		t.Fatalf("Run did not return within %s of its context's end", waitTimeout)
	}
}
