package api

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schedulerhq/scheduler/internal/metrics"
	"github.com/schedulerhq/scheduler/internal/store"
	"github.com/schedulerhq/scheduler/internal/testdb"
	"github.com/schedulerhq/scheduler/internal/testmetrics"
)

// Any login may NOTIFY scheduler_run_finished. A payload that names no run used to wake
// every ?wait request of the replica to re-read its run: 1000 such notifications cost up to
// 1000 reads per waiter. Now it wakes nobody and is counted ignored; a run id wakes only that
// run's waiters, so 1000 distinct ids of other runs cost run 41's waiter no read either.
func TestRunFinishedNotificationsThatNameNoRunWakeNobody(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	db, u := testdb.Open(t, store.Options{})
	m := metrics.New()
	f := &finishWatch{notifier: startNotifier(t, db), metrics: m}
	quiet, listening, doneQuiet := f.watch(41)
	defer doneQuiet()
	marker, _, doneMarker := f.watch(42)
	defer doneMarker()
	select {
	case <-listening:
	case <-ctx.Done():
		t.Fatal("the watch never listened")
	}

	attacker, err := pgx.Connect(ctx, testdb.LoginURL(t, u))
	require.NoError(t, err)
	defer attacker.Close(context.Background())
	_, err = attacker.Exec(ctx, `SELECT pg_notify('scheduler_run_finished', 'x' || g) FROM generate_series(1, 1000) AS g`)
	require.NoError(t, err)
	_, err = attacker.Exec(ctx, `SELECT pg_notify('scheduler_run_finished', (1000 + g)::text) FROM generate_series(1, 1000) AS g`)
	require.NoError(t, err)
	// Notifications arrive in order: once run 42's waiter is woken, all 2000 were read.
	_, err = attacker.Exec(ctx, `SELECT pg_notify('scheduler_run_finished', '42')`)
	require.NoError(t, err)
	select {
	case <-marker:
	case <-ctx.Done():
		t.Fatal("run 42's waiter was never woken")
	}
	select {
	case <-quiet:
		t.Fatal("a notification that names no run, or another run, woke run 41's waiter")
	default:
	}
	assert.Equal(t, 1000.0, ignoredNotifications(t, m, store.RunFinishedChannel))
}

func ignoredNotifications(t *testing.T, m *metrics.Metrics, channel string) float64 {
	t.Helper()
	return testmetrics.Series(testmetrics.Scrape(t, m), "scheduler_control_notifications_ignored_total",
		map[string]string{"channel": channel}).GetCounter().GetValue()
}
