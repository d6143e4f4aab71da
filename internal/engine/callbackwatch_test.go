package engine

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schedulerhq/scheduler/internal/config"
	"github.com/schedulerhq/scheduler/internal/store"
	"github.com/schedulerhq/scheduler/internal/store/storetest"
)

// Guarantee 10 on the engine's clock: the callback watch ends the accepted run whose
// heartbeats stopped longer ago than its heartbeat timeout by the clock, at the clock's time
// and with its reason, and leaves the one whose last heartbeat is a second younger.
func TestCallbackWatchOnTheClockEndsExactlyTheSilentRun(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, url := newDB(t)
	accepted := func(job string, heartbeatAgo time.Duration) int64 {
		at := clockAt.Add(-heartbeatAgo)
		return storetest.Run(ctx, t, db.Pool, storetest.RunOpts{Job: job, Status: store.StatusRunning,
			CreatedAt: at, StartedAt: at, Epoch: storetest.Ptr(int64(1)),
			CallbackTokenHash: store.CallbackTokenHash("schcb_" + job), CallbackAcceptedAt: at, CallbackHeartbeatAt: at,
			CallbackHeartbeatTimeout: time.Minute, CallbackDeadline: clockAt.Add(time.Hour)}).ID
	}
	silent := accepted("tick", 61*time.Second)
	fresh := accepted("slow", 59*time.Second)

	n := startNode(t, url, "a", nodeOptions{jobs: []config.Job{manualOnly(t, "tick", 2*time.Hour), manualOnly(t, "slow", 2*time.Hour)}, now: clockAt})
	var ended []int64
	for len(ended) == 0 {
		for _, x := range awaitSignal(t, &n.en.testSignals.callbackWatch, "a callback watch pass that ends a run") {
			ended = append(ended, x.ID)
		}
	}
	assert.Equal(t, []int64{silent}, ended, "exactly the run silent past its heartbeat timeout")

	run := getRun(t, db, silent)
	assert.Equal(t, store.StatusTimedOut, run.Status)
	require.NotNil(t, run.FinishedAt)
	assert.Equal(t, clockAt, run.FinishedAt.UTC(), "ended at the clock's time")
	require.NotNil(t, run.Error)
	assert.Equal(t, "timed out: no heartbeat from the target within 00:01:00", *run.Error)
	awaitSignal(t, &n.en.testSignals.callbackWatch, "the next pass")
	assert.Equal(t, store.StatusRunning, getRun(t, db, fresh).Status, "a heartbeat 59 s old is within the timeout by the clock")
}
