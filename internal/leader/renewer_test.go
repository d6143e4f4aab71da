package leader

import (
	"context"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/schedulerhq/scheduler/internal/store"
	"github.com/schedulerhq/scheduler/internal/testdb"
)

// A partition whose lock this replica holds while its election waits (a replica taking
// many partitions at once elects them one after another) is stamped by the renewer, so the
// others never take its idle lock backend for a paused holder's, however long it waits.
func TestALockWaitingForItsElectionIsNotStale(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := testdb.New(t)
	const lease = time.Second
	db := testdb.Connect(t, url, store.Options{InstanceID: "r1", LeaseTimeout: lease})
	require.NoError(t, db.EnsureCluster(ctx, 4))
	session, err := db.OpenPartitionSession(ctx)
	require.NoError(t, err)
	t.Cleanup(session.Close)
	ok, err := session.TryLock(ctx, 3)
	require.NoError(t, err)
	require.True(t, ok)

	p, err := NewPartitions(PartitionsConfig{DB: db.DB, InstanceID: "r1", Count: 4, LeaseTimeout: lease,
		HeartbeatInterval: lease / 5, Log: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))})
	require.NoError(t, err)
	p.held[3] = &heldPartition{lockedAt: time.Now()} // locked, its election not yet run
	renewCtx, stop := context.WithCancel(ctx)
	renewing := make(chan struct{})
	go func() { defer close(renewing); newRenewer(p).run(renewCtx) }()
	t.Cleanup(func() { stop(); <-renewing })

	// The observation window is the point of the test: twice the lease.
	deadline := time.Now().Add(2 * lease)
	for time.Now().Before(deadline) {
		s, err := db.SurveyPartitions(ctx, lease)
		require.NoError(t, err)
		require.NotContains(t, s.Stale, 3, "the waiting election's lock was taken for a paused holder's")
		time.Sleep(lease / 5) // one survey per heartbeat, as the other replicas make
	}
}
