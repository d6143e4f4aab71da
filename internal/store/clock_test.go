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

// The claims decide by the now they are given (nil in production: the database's clock),
// whole: a slot after it is Early by exactly the difference, one before it is claimed and
// started at it, one within a minimum gap of a run started before it is skipped at it, and a
// claim alone (ClaimSlot) decides the same.
func TestClaimsDecideByTheNowTheyAreGiven(t *testing.T) {
	t.Parallel()
	db, _ := openAsLeader(t)
	ctx := context.Background()
	now := time.Date(2026, 3, 2, 10, 0, 30, 0, time.UTC)
	storetest.Run(ctx, t, db.Pool, storetest.RunOpts{Job: "gap", Status: store.StatusSucceeded,
		ScheduledAt: now.Add(-5 * time.Minute), StartedAt: now.Add(-5 * time.Minute), FinishedAt: now})
	claim := func(job string, at time.Time) store.Claim {
		return store.Claim{Job: job, ScheduledAt: at, Trigger: store.TriggerSchedule, InstanceID: "a", Now: &now}
	}
	gap := claim("gap", now.Add(-30*time.Second))
	gap.MinGap = 10 * time.Minute

	var out []store.ClaimOutcome
	var alone store.ClaimOutcome
	require.NoError(t, db.Fenced(ctx, store.Fence{Epoch: 1}, func(tx *store.Tx) error {
		var err error
		if out, err = tx.ClaimSlots(ctx, []store.Claim{claim("due", now.Add(-30*time.Second)), claim("early", now.Add(90*time.Second)), gap}); err != nil {
			return err
		}
		alone, err = tx.ClaimSlot(ctx, claim("alone", now.Add(45*time.Second)))
		return err
	}))
	require.NotNil(t, out[0].Run)
	assert.Equal(t, now, out[0].Run.StartedAt.UTC(), "started at the given now")
	assert.Equal(t, 90*time.Second, out[1].Early)
	assert.Equal(t, store.ReasonMinGap, out[2].Skipped)
	assert.Equal(t, 1, countRows(t, db, `SELECT count(*) FROM job_runs WHERE job = 'gap' AND status = 'skipped' AND finished_at = $1`, now))
	assert.Equal(t, 45*time.Second, alone.Early)
}
