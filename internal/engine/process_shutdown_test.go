package engine

import (
	"context"
	"net/http"
	"net/http/httptest"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schedulerhq/scheduler/internal/store"
	"github.com/schedulerhq/scheduler/internal/testdb"
)

// A leader whose run waits on a webhook that never answers still exits, with status 0,
// within SCHEDULER_SHUTDOWN_TIMEOUT (plus the bounded close of its pool) on SIGTERM: neither
// the resignation's wait for its runs to record their sends nor a job still sending holds
// the exit; the lock goes with the process.
func TestSigtermMidSendExitsWithinTheShutdownTimeout(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the scheduler binary")
	}
	t.Parallel()
	const shutdownTimeout = 2 * time.Second
	db, dbURL := testdb.Open(t, store.Options{InstanceID: "observer"})
	ctx := context.Background()
	_, err := db.Pool.Exec(ctx, `
		INSERT INTO organizations (name, timezone, admin_email) VALUES ('clinic', 'Europe/Paris', 'admin@clinic.example');
		INSERT INTO appointments (organization_id, contact_email, host_email, start_at, end_at, status, booked_at)
		SELECT o.id, 'contact-' || i || '@clinic.example', 'host@clinic.example',
		       now() + interval '10 minutes' + i * interval '1 second', now() + interval '1 hour', 'BOOKED',
		       now() - interval '1 day'
		FROM organizations o, generate_series(1, 20) AS i`)
	require.NoError(t, err)
	arrived := make(chan struct{}, 100)
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		arrived <- struct{}{}
		select { // a provider that hangs until the test ends
		case <-release:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(release) })
	bin := buildScheduler(t, t.TempDir())
	p := startProcessIn(t, "", bin, dbURL, "sender",
		"SCHEDULER_SENDER=webhook", "SCHEDULER_WEBHOOK_URL="+srv.URL,
		"SCHEDULER_WEBHOOK_TIMEOUT=1m", "SCHEDULER_WEBHOOK_MAX_ATTEMPTS=1",
		"SCHEDULER_SHUTDOWN_TIMEOUT="+shutdownTimeout.String(),
		"SCHEDULER_JOB_APPOINTMENT_REMINDERS_HOUR_SCHEDULE=@every 1s")
	select {
	case <-arrived:
	case <-time.After(30 * time.Second):
		t.Fatal("no reminder reached the webhook")
	}

	signalled := time.Now()
	require.NoError(t, p.cmd.Process.Signal(syscall.SIGTERM))
	exited := make(chan error, 1)
	go func() { exited <- p.cmd.Wait() }()
	select {
	case err := <-exited:
		require.NoError(t, err, "SIGTERM must exit 0")
		t.Logf("exited %s after SIGTERM", time.Since(signalled))
		// The pool's close is bounded by 2 s; the rest of the margin is a busy machine.
		assert.Less(t, time.Since(signalled), shutdownTimeout+4*time.Second)
	case <-time.After(shutdownTimeout + 20*time.Second):
		t.Fatalf("the process had not exited %s after SIGTERM", time.Since(signalled))
	}
}
