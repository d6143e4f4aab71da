package main

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schedulerhq/scheduler/internal/store"
	"github.com/schedulerhq/scheduler/internal/testdb"
)

// "scheduler partitions set N" refuses a bad count and a live replica, each with what to do,
// and otherwise changes the cluster's count.
func TestPartitionsSetCommand(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, u := testdb.Open(t, store.Options{})
	require.NoError(t, db.EnsureCluster(ctx, 4))
	env := []string{"DATABASE_URL=" + u}

	code, _, stderr := runCLI(t, env, "partitions", "set", "0")
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, stderr, "from 1 to 1024")

	_, err := db.HeartbeatInstance(ctx, store.Instance{InstanceID: "still-up", StartedAt: time.Now()})
	require.NoError(t, err)
	code, _, stderr = runCLI(t, env, "partitions", "set", "8")
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, stderr, "still-up")
	assert.Contains(t, stderr, "stop every replica")

	require.NoError(t, db.DeleteInstance(ctx, "still-up"))
	code, out, stderr := runCLI(t, env, "partitions", "set", "8")
	require.Equal(t, exitOK, code, stderr)
	assert.Contains(t, out, "SCHEDULER_PARTITIONS=8")
	assert.NoError(t, db.EnsureCluster(ctx, 8), "a replica with the new count starts")
	assert.ErrorIs(t, db.EnsureCluster(ctx, 4), store.ErrPartitionsMismatch, "one with the old count does not")
}
