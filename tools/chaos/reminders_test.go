package main

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/schedulerhq/scheduler/internal/testdb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// receiver is a webhook provider that de-duplicates on the Idempotency-Key, as the webhook
// sender expects: it answers each POST after a delay, delivers a key's message the first
// time it sees the key, and counts every POST.
type receiver struct {
	latency time.Duration
	mu      sync.Mutex
	posts   map[string]int     // Idempotency-Key → POSTs received
	keys    map[int64][]string // appointment id → keys delivered
	reached chan struct{}      // closed once `after` POSTs have arrived
	after   int
}

func (rc *receiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var m struct {
		Template string `json:"template"`
		Payload  struct {
			AppointmentID int64 `json:"appointment_id"`
		} `json:"payload"`
	}
	body, _ := io.ReadAll(r.Body)
	key := r.Header.Get("Idempotency-Key")
	if json.Unmarshal(body, &m) != nil || key == "" {
		http.Error(w, "bad message", http.StatusBadRequest)
		return
	}
	time.Sleep(rc.latency) // the provider's own latency
	rc.mu.Lock()
	rc.posts[key]++
	if rc.posts[key] == 1 {
		rc.keys[m.Payload.AppointmentID] = append(rc.keys[m.Payload.AppointmentID], key)
	}
	total := 0
	for _, n := range rc.posts {
		total += n
	}
	if total == rc.after {
		close(rc.reached)
	}
	rc.mu.Unlock()
	_, _ = w.Write([]byte(`{"id":"wh-` + key + `"}`))
}

func (rc *receiver) delivered() int {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return len(rc.keys)
}

// TestChaosLeaderKilledMidWaveDeliversEveryReminderOnce: two real replicas send the hour
// reminders of 1 000 appointments to a webhook that takes 50 ms per message; the leader is
// killed with SIGKILL in the middle of the wave. The follower takes over, sends the rest,
// and resends the claims the dead leader left PENDING (their outcome unknown) under their
// own Idempotency-Key once the claim timeout has passed. The receiver must see every due
// appointment's reminder, delivered under one key each, and nothing for the cancelled ones.
func TestChaosLeaderKilledMidWaveDeliversEveryReminderOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("chaos run: real processes; skipped with -short")
	}
	binary := testBinary(t)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Second)
	defer cancel()
	const due = 1000
	// Claims older than 3 s are orphans: the dead leader's are resent after that.
	rc, r, pool, dir := startReminderWave(ctx, t, binary, due, "3s")
	_, leaderID, _, err := r.leader(ctx)
	require.NoError(t, err)
	leader := r.byID(leaderID)
	require.NotNil(t, leader, "the leader %q is one of ours", leaderID)
	require.NoError(t, leader.cmd.Process.Signal(syscall.SIGKILL))
	<-leader.done
	killedAt := rc.delivered()
	t.Logf("leader %s killed after %d deliveries", leaderID, killedAt)

	// The follower finishes the wave; the dead leader's claims wait for the claim timeout.
	for rc.delivered() < due || pending(ctx, t, pool) > 0 {
		select {
		case <-ctx.Done():
			t.Fatalf("after the kill: %d of %d delivered; replica logs: %s", rc.delivered(), due, dir)
		case <-time.After(100 * time.Millisecond): // polling the receiver and the table, with the deadline above
		}
	}
	r.stopAll(syscall.SIGTERM)

	rc.mu.Lock()
	defer rc.mu.Unlock()
	var cancelled, resent int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM appointments WHERE status = 'CANCELLED'`).Scan(&cancelled))
	for id, keys := range rc.keys {
		assert.Len(t, keys, 1, "appointment %d delivered under one Idempotency-Key", id)
	}
	assert.Len(t, rc.keys, due, "every due appointment's reminder was delivered, none of the %d cancelled", cancelled)
	for _, n := range rc.posts {
		if n > 1 {
			resent++
		}
	}
	var sent, failed int
	require.NoError(t, pool.QueryRow(ctx, `
SELECT count(*) FILTER (WHERE status = 'SENT'), count(*) FILTER (WHERE status = 'FAILED')
FROM message_deliveries WHERE template = 'appointment-reminder-hour'`).Scan(&sent, &failed))
	assert.Equal(t, due, sent)
	assert.Zero(t, failed)
	t.Logf("%d delivered; %d keys were POSTed again after the kill (the receiver de-duplicated them)", len(rc.keys), resent)
}

func pending(ctx context.Context, t *testing.T, pool *pgxpool.Pool) int {
	var n int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM message_deliveries WHERE status = 'PENDING'`).Scan(&n))
	return n
}

// startReminderWave starts two real replicas sending the hour reminders of due appointments
// (and ignoring 50 cancelled ones) to a webhook receiver answering in 50 ms, with the given
// claim timeout, and returns once a quarter of the wave has been delivered. Everything stops
// when the test ends.
func startReminderWave(ctx context.Context, t *testing.T, binary string, due int, claimTimeout string) (*receiver, *runner, *pgxpool.Pool, string) {
	t.Helper()
	url, pool := reminderWave(ctx, t, due)
	rc := &receiver{latency: 50 * time.Millisecond, posts: map[string]int{}, keys: map[int64][]string{},
		reached: make(chan struct{}), after: due / 4}
	srv := httptest.NewServer(rc)
	t.Cleanup(srv.Close)
	dir := workDir(t)
	r := &runner{
		cfg: Config{
			DatabaseURL: url, Binary: binary, WorkDir: dir,
			Jobs: map[string]string{"appointment-reminders-hour": "@every 1s"},
			Env: []string{
				"SCHEDULER_SENDER=webhook", "SCHEDULER_WEBHOOK_URL=" + srv.URL,
				"SCHEDULER_WEBHOOK_TIMEOUT=1s", "SCHEDULER_WEBHOOK_MAX_ATTEMPTS=2", "SCHEDULER_WEBHOOK_BACKOFF=100ms",
				"SCHEDULER_ABANDON_CLAIM_TIMEOUT=" + claimTimeout,
			},
			Log: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
		},
		pool: pool, rng: rand.New(rand.NewPCG(1, 2)),
	}
	t.Cleanup(func() { r.stopAll(syscall.SIGKILL) })
	for i := range 2 {
		require.NoError(t, r.start(i))
	}
	select {
	case <-rc.reached:
	case <-ctx.Done():
		t.Fatalf("the wave did not reach %d messages; replica logs: %s", rc.after, dir)
	}
	return rc, r, pool, dir
}

// reminderWave makes a test database with due BOOKED appointments whose hour reminder is due
// and 50 cancelled ones, and returns its URL and a pool on it.
func reminderWave(ctx context.Context, t *testing.T, due int) (string, *pgxpool.Pool) {
	t.Helper()
	url := testdb.New(t)
	pool, err := pgxpool.New(ctx, url)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	_, err = pool.Exec(ctx, `
INSERT INTO organizations (name, timezone, admin_email) VALUES ('chaos clinic', 'Europe/Paris', 'admin@chaos.example')`)
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `
INSERT INTO appointments (organization_id, contact_email, host_email, start_at, end_at, status, booked_at)
SELECT o.id, 'contact-' || i || '@chaos.example', 'host@chaos.example',
       now() + interval '10 minutes' + i * interval '1 second', now() + interval '1 hour',
       CASE WHEN i > $1 THEN 'CANCELLED' ELSE 'BOOKED' END, now() - interval '1 day'
FROM organizations o, generate_series(1, $1 + 50) AS i`, due)
	require.NoError(t, err)
	return url, pool
}
