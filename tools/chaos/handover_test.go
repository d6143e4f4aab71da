package main

import (
	"context"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schedulerhq/scheduler/internal/store"
)

// TestChaosVoluntaryHandOverMidWaveLosesAndRepeatsNothing: two real replicas send the hour
// reminders of 1 000 appointments to a webhook that takes 50 ms per message, and the leader
// hands over in the middle of the wave, by an operator's step-down or by SIGTERM. A
// voluntary hand-over records what was sent before another replica leads: every message
// delivered is SENT, every claim not yet sent is given back and goes out promptly from the
// new leader (long before the ten-minute claim timeout, after which orphans are resent),
// and the receiver sees each Idempotency-Key exactly once.
func TestChaosVoluntaryHandOverMidWaveLosesAndRepeatsNothing(t *testing.T) {
	if testing.Short() {
		t.Skip("chaos run: real processes; skipped with -short")
	}
	binary := testBinary(t)
	for _, how := range []string{"step-down", "SIGTERM"} {
		t.Run(how, func(t *testing.T) {
			const due = 1000
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			// Nothing may rely on the orphan resend: only what the hand-over recorded and gave
			// back can go out within this test.
			rc, r, pool, dir := startReminderWave(ctx, t, binary, due, "10m")
			epoch, leaderID, _, err := r.leader(ctx)
			require.NoError(t, err)
			leader := r.byID(leaderID)
			require.NotNil(t, leader, "the leader %q is one of ours", leaderID)
			switch how {
			case "step-down":
				// A step-down is a control row written as the API does; a bare NOTIFY is ignored.
				db, err := store.Open(ctx, r.cfg.DatabaseURL, store.Options{InstanceID: "chaos-test", LeaseTimeout: 5 * time.Second})
				require.NoError(t, err)
				_, ok, err := db.RequestStepDown(ctx, store.ControlRequest{TokenKind: "test", RequestID: "chaos-step-down"})
				db.Close()
				require.NoError(t, err)
				require.True(t, ok, "a leader to step down")
			case "SIGTERM":
				require.NoError(t, leader.cmd.Process.Signal(syscall.SIGTERM))
			}
			t.Logf("leader %s (epoch %d) handed over by %s after %d deliveries", leaderID, epoch, how, rc.delivered())

			for rc.delivered() < due || pending(ctx, t, pool) > 0 {
				select {
				case <-ctx.Done():
					t.Fatalf("after the hand-over: %d of %d delivered, %d PENDING; replica logs: %s",
						rc.delivered(), due, pending(context.Background(), t, pool), dir)
				case <-time.After(100 * time.Millisecond): // polling the receiver and the table, with the deadline above
				}
			}
			newEpoch, _, _, err := r.leader(ctx)
			require.NoError(t, err)
			assert.Greater(t, newEpoch, epoch, "another term finished the wave")
			r.stopAll(syscall.SIGTERM)

			rc.mu.Lock()
			defer rc.mu.Unlock()
			assert.Len(t, rc.keys, due, "every due appointment's reminder was delivered")
			for key, n := range rc.posts {
				assert.Equal(t, 1, n, "key %s POSTed once: nothing sent twice", key)
			}
			var sent, failed int
			require.NoError(t, pool.QueryRow(ctx, `
SELECT count(*) FILTER (WHERE status = 'SENT'), count(*) FILTER (WHERE status = 'FAILED')
FROM message_deliveries WHERE template = 'appointment-reminder-hour'`).Scan(&sent, &failed))
			assert.Equal(t, due, sent)
			assert.Zero(t, failed)
		})
	}
}
