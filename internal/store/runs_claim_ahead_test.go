package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schedulerhq/scheduler/internal/store"
	"github.com/schedulerhq/scheduler/internal/store/storetest"
)

// A claim ahead of its slot wins only outright, and a run it wins starts at the slot: a
// job with an active run, a paused job, a job within its minimum gap or a slot beyond the
// lead records nothing and comes back Early, to be claimed at its slot as today (where the
// overlap, the pause or the gap is recorded then, by what holds at the slot).
func TestClaimAheadWinsOnlyOutright(t *testing.T) {
	t.Parallel()
	db, now := openAsLeader(t)
	ctx := context.Background()
	slot := now.Add(10 * time.Second) // ten seconds ahead
	wall := time.Now()
	storetest.Runs(ctx, t, db.Pool,
		storetest.RunOpts{Job: "busy", Status: store.StatusRunning, StartedAt: wall},
		storetest.RunOpts{Job: "gap", Status: store.StatusSucceeded, ScheduledAt: slot.Add(-time.Minute), StartedAt: wall, FinishedAt: wall})
	_, err := db.Pool.Exec(ctx, `INSERT INTO job_settings (job, paused) VALUES ('paused', true)`)
	require.NoError(t, err)

	claim := func(job string, at time.Time, ahead time.Duration) store.Claim {
		return store.Claim{Job: job, ScheduledAt: at, Trigger: store.TriggerSchedule, InstanceID: "a", Ahead: ahead}
	}
	gap := claim("gap", slot, time.Minute)
	gap.MinGap = time.Hour
	claims := []store.Claim{claim("free", slot, time.Minute), claim("busy", slot, time.Minute),
		claim("paused", slot, time.Minute), gap, claim("beyond", slot, time.Second), claim("not-ahead", slot, 0)}
	var out []store.ClaimOutcome
	require.NoError(t, db.Fenced(ctx, store.Fence{Epoch: 1}, func(tx *store.Tx) error {
		out, err = tx.ClaimSlots(ctx, claims)
		return err
	}))

	require.NotNil(t, out[0].Run, "free")
	assert.True(t, out[0].Run.StartedAt.Equal(slot), "the run starts at its slot: %s", out[0].Run.StartedAt)
	assert.Greater(t, out[0].StartIn, 8*time.Second, "it waits for the slot")
	assert.LessOrEqual(t, out[0].StartIn, 10*time.Second)
	for i, job := range []string{"busy", "paused", "gap", "beyond", "not-ahead"} {
		o := out[i+1]
		assert.Nil(t, o.Run, job)
		assert.Empty(t, o.Skipped, "%s: nothing recorded ahead of the slot", job)
		assert.Greater(t, o.Early, 8*time.Second, "%s comes back early", job)
	}
	var recorded int
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT count(*) FROM job_runs WHERE scheduled_at = $1`, slot).Scan(&recorded))
	assert.Equal(t, 1, recorded, "only the free job's slot has a row")
}
