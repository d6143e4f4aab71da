package store_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schedulerhq/scheduler/internal/store"
	"github.com/schedulerhq/scheduler/internal/store/storetest"
	"github.com/schedulerhq/scheduler/internal/testdb"
)

// A batch of claims decides each slot as ClaimSlot would, whatever state its job is in:
// free (claimed), slot already recorded (taken), paused, an active run (skipped as an
// overlap, or left unrecorded for a queue-one job), started within its minimum gap,
// still in the future by the database clock; and two slots of one job in one batch run once.
func TestClaimSlotsDecidesEachSlotAsClaimSlotDoes(t *testing.T) {
	t.Parallel()
	db, now := openAsLeader(t)
	ctx := context.Background()
	slot := now.Add(-time.Second)
	wall := time.Now()
	storetest.Runs(ctx, t, db.Pool,
		storetest.RunOpts{Job: "taken", Status: store.StatusSucceeded, ScheduledAt: slot, StartedAt: wall, FinishedAt: wall},
		storetest.RunOpts{Job: "busy", Status: store.StatusRunning, StartedAt: wall},
		storetest.RunOpts{Job: "busy-queue-one", Status: store.StatusRunning, StartedAt: wall},
		storetest.RunOpts{Job: "gap", Status: store.StatusSucceeded, ScheduledAt: slot.Add(-time.Minute), StartedAt: wall, FinishedAt: wall})
	_, err := db.Pool.Exec(ctx, `INSERT INTO job_settings (job, paused) VALUES ('paused', true)`)
	require.NoError(t, err)

	claim := func(job string, at time.Time) store.Claim {
		return store.Claim{Job: job, ScheduledAt: at, Trigger: store.TriggerSchedule, InstanceID: "a"}
	}
	gap := claim("gap", slot)
	gap.MinGap = time.Hour
	queueOne := claim("busy-queue-one", slot)
	queueOne.QueueOne = true
	v := int64(7)
	free := claim("free", slot)
	free.DefinitionVersion = &v
	claims := []store.Claim{free, claim("taken", slot), claim("paused", slot), claim("busy", slot), queueOne, gap,
		claim("early", now.Add(time.Hour)), claim("twice", slot), claim("twice", slot.Add(-time.Second))}
	// Many free jobs besides, as at the top of the hour.
	for i := range 500 {
		claims = append(claims, claim(fmt.Sprintf("many-%03d", i), slot))
	}

	var out []store.ClaimOutcome
	require.NoError(t, db.Fenced(ctx, store.Fence{Epoch: 1}, func(tx *store.Tx) error {
		var err error
		out, err = tx.ClaimSlots(ctx, claims)
		return err
	}))
	require.Len(t, out, len(claims))
	require.NotNil(t, out[0].Run, "free")
	assert.Equal(t, "free", out[0].Run.Job)
	assert.Equal(t, &v, out[0].Run.DefinitionVersion)
	assert.Equal(t, int64(1), *out[0].Run.Epoch)
	// Each claimed run comes back whole, as the row stored (claimed: running, started now).
	for _, i := range []int{0, 8, 9, len(claims) - 1} {
		stored, err := db.Run(ctx, out[i].Run.ID)
		require.NoError(t, err)
		assert.Equal(t, stored, out[i].Run, "claim %d", i)
	}
	assert.True(t, out[1].Taken, "taken")
	assert.Equal(t, store.ReasonPaused, out[2].Skipped)
	assert.Equal(t, store.ReasonOverlap, out[3].Skipped)
	assert.True(t, out[4].Busy, "queue-one")
	assert.Equal(t, store.ReasonMinGap, out[5].Skipped)
	assert.Greater(t, out[6].Early, 59*time.Minute, "early")
	require.NotNil(t, out[8].Run, "the earlier slot of a job claimed twice in one batch runs")
	assert.Equal(t, store.ReasonOverlap, out[7].Skipped, "its later slot meets the earlier one's run")
	for i, o := range out[9:] {
		require.NotNil(t, o.Run, "many-%03d", i)
		assert.Equal(t, claims[9+i].Job, o.Run.Job)
	}
	for i, o := range out {
		if o.Skipped != "" {
			assert.Positive(t, o.SkippedID, "claim %d", i)
		}
	}

	var rows, busyRows int
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT count(*) FROM job_runs WHERE scheduled_at IS NOT NULL`).Scan(&rows))
	// taken and gap's earlier rows, then: free, paused, busy, gap, twice ×2, 500 many.
	assert.Equal(t, 2+6+500, rows)
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT count(*) FROM job_runs WHERE job = 'busy-queue-one'`).Scan(&busyRows))
	assert.Equal(t, 1, busyRows, "a queue-one slot that meets an active run is not recorded")

	// The same batch again: every slot is now recorded (or early, or still busy).
	require.NoError(t, db.Fenced(ctx, store.Fence{Epoch: 1}, func(tx *store.Tx) error {
		var err error
		out, err = tx.ClaimSlots(ctx, claims)
		return err
	}))
	for i, o := range out {
		switch claims[i].Job {
		case "early":
			assert.Positive(t, o.Early)
		case "busy-queue-one":
			assert.True(t, o.Busy)
		default:
			assert.True(t, o.Taken, "claim %d (%s) a second time", i, claims[i].Job)
		}
	}
}

// A slot's claims and a batch's ends are planned for their own arrays every time, also from
// the sixth time on one connection, where PostgreSQL would otherwise switch their prepared
// statements to a generic plan that guesses ten elements (nested loops where thousands want
// hashes).
func TestBulkStatementsArePlannedForTheirArraysEveryTime(t *testing.T) {
	t.Parallel()
	db, _ := testdb.Open(t, store.Options{MaxConns: 1})
	ctx := context.Background()
	_, err := db.Pool.Exec(ctx, `UPDATE scheduler_leader SET epoch = 1`)
	require.NoError(t, err)
	var now time.Time
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT date_trunc('minute', now())`).Scan(&now))
	for round := range 8 {
		slot := now.Add(time.Duration(round-8) * time.Second)
		claims := make([]store.Claim, 50)
		for i := range claims {
			claims[i] = store.Claim{Job: fmt.Sprintf("job-%02d", i), ScheduledAt: slot,
				Trigger: store.TriggerSchedule, InstanceID: "a"}
		}
		var finishes []store.Finish
		require.NoError(t, db.Fenced(ctx, store.Fence{Epoch: 1}, func(tx *store.Tx) error {
			out, err := tx.ClaimSlots(ctx, claims)
			if err != nil {
				return err
			}
			for i, o := range out {
				require.NotNil(t, o.Run, "round %d, claim %d", round, i)
				finishes = append(finishes, store.Finish{RunID: o.Run.ID, Status: store.StatusSucceeded, Stats: []byte(`{}`)})
			}
			assertPlannedForItsArrays(t, ctx, tx, "%WITH active AS MATERIALIZED%INSERT INTO job_runs%", round)
			return nil
		}))
		require.NoError(t, db.Fenced(ctx, store.Fence{Epoch: 1}, func(tx *store.Tx) error {
			done, err := tx.FinishRuns(ctx, finishes)
			if err != nil {
				return err
			}
			require.Len(t, done, len(finishes), "round %d", round)
			assertPlannedForItsArrays(t, ctx, tx, "%WITH ended AS%UPDATE job_runs r%", round)
			return nil
		}))
	}
}

// assertPlannedForItsArrays checks that the prepared statement like pattern, on tx's
// connection, ran round+1 times, never with a generic plan.
func assertPlannedForItsArrays(t *testing.T, ctx context.Context, tx *store.Tx, pattern string, round int) {
	t.Helper()
	var generic, custom int64
	require.NoError(t, tx.QueryRow(ctx, `SELECT coalesce(sum(generic_plans), 0), coalesce(sum(custom_plans), 0)
		FROM pg_prepared_statements
		WHERE statement LIKE $1 AND statement NOT LIKE '%pg_prepared_statements%'`, pattern).Scan(&generic, &custom))
	assert.Zero(t, generic, "round %d: %s ran with a generic plan", round, pattern)
	assert.Equal(t, int64(round+1), custom, "round %d: %s ran on the one connection, planned each time", round, pattern)
}
