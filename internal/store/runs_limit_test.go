package store_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schedulerhq/scheduler/internal/store"
	"github.com/schedulerhq/scheduler/internal/store/storetest"
	"github.com/schedulerhq/scheduler/internal/testdb"
)

// max_runs counts the slots that ran, whatever their end (succeeded, failed, timed_out,
// abandoned, cancelled after it started, still running), and neither skips nor misses nor
// manual runs, re-runs or backfills. Once the count is reached a claim records nothing and says Finished, in a
// batch (ClaimSlots) as alone (ClaimSlot), before any other reason (paused, overlap).
func TestMaxRunsCountsTheSlotsThatRan(t *testing.T) {
	t.Parallel()
	db, now := openAsLeader(t)
	ctx := context.Background()
	at := func(i int) time.Time { return now.Add(-time.Duration(100-i) * time.Second).UTC() }
	wall := time.Now()
	run := func(job, trigger, status string, slot, started, finished time.Time) storetest.RunOpts {
		return storetest.RunOpts{Job: job, Trigger: trigger, Status: status, ScheduledAt: slot, StartedAt: started, FinishedAt: finished}
	}
	storetest.Runs(ctx, t, db.Pool,
		run("ran", store.TriggerSchedule, store.StatusSucceeded, at(1), wall, wall),
		run("ran", store.TriggerCatchUp, store.StatusFailed, at(2), wall, wall),
		run("ran", store.TriggerSchedule, store.StatusSkipped, at(3), time.Time{}, wall),
		run("ran", store.TriggerSchedule, store.StatusMissed, at(4), time.Time{}, wall),
		run("ran", store.TriggerManual, store.StatusSucceeded, time.Time{}, wall, wall),
		run("cancelled", store.TriggerSchedule, store.StatusCancelled, at(5), wall, wall),
		run("cancelled", store.TriggerSchedule, store.StatusAbandoned, at(6), wall, wall),
		run("running", store.TriggerSchedule, store.StatusRunning, at(7), wall, time.Time{}))
	// A re-run and a backfill do a slot again on an operator's request: neither counts.
	rerun, backfill := run("ran", store.TriggerRerun, store.StatusSucceeded, at(1), wall, wall),
		run("ran", store.TriggerBackfill, store.StatusSucceeded, at(4), wall, wall)
	rerun.Rerun, backfill.Rerun = 1, 1
	storetest.Runs(ctx, t, db.Pool, rerun, backfill)
	_, err := db.Pool.Exec(ctx, `INSERT INTO job_settings (job, paused) VALUES ('cancelled', true)`)
	require.NoError(t, err)

	ran, err := db.RanRuns(ctx, []string{"ran", "cancelled", "running", "none"})
	require.NoError(t, err)
	assert.Equal(t, map[string]store.RanRuns{
		"ran":       {Count: 2, Last: at(2)},
		"cancelled": {Count: 2, Last: at(6)},
		"running":   {Count: 1, Last: at(7)},
	}, normalise(ran))

	claim := func(job string, slot time.Time, max int) store.Claim {
		return store.Claim{Job: job, ScheduledAt: slot, Trigger: store.TriggerSchedule, InstanceID: "a", MaxRuns: max}
	}
	claims := []store.Claim{
		claim("ran", at(10), 3),       // 2 of 3: runs
		claim("cancelled", at(10), 2), // 2 of 2, and paused: finished, not skipped
		claim("running", at(10), 1),   // 1 of 1 running: finished, not an overlap
		claim("other", at(10), 0),     // no limit
	}
	var out []store.ClaimOutcome
	require.NoError(t, db.Fenced(ctx, store.Fence{Epoch: 1}, func(tx *store.Tx) error {
		out, err = tx.ClaimSlots(ctx, claims)
		return err
	}))
	require.NotNil(t, out[0].Run)
	assert.Equal(t, store.ClaimOutcome{Finished: true}, out[1])
	assert.Equal(t, store.ClaimOutcome{Finished: true}, out[2])
	require.NotNil(t, out[3].Run)
	_, err = db.Pool.Exec(ctx, `UPDATE job_runs SET status = 'succeeded', finished_at = now() WHERE job = 'ran' AND status = 'running'`)
	require.NoError(t, err)

	// The third run reached: alone or in a batch, the next slot records nothing.
	require.NoError(t, db.Fenced(ctx, store.Fence{Epoch: 1}, func(tx *store.Tx) error {
		one, err := tx.ClaimSlot(ctx, claim("ran", at(11), 3))
		require.NoError(t, err)
		assert.Equal(t, store.ClaimOutcome{Finished: true}, one)
		out, err = tx.ClaimSlots(ctx, []store.Claim{claim("ran", at(12), 3), claim("ran", at(13), 4)})
		return err
	}))
	assert.Equal(t, store.ClaimOutcome{Finished: true}, out[0])
	require.NotNil(t, out[1].Run, "a higher limit (a new version of the definition) runs again")
	assert.Equal(t, 0, countRows(t, db, `SELECT count(*) FROM job_runs WHERE scheduled_at IN ($1, $2)`, at(11), at(12)),
		"nothing is recorded past the limit")
}

// Two leaders' claims racing for a job's last run: the count is read under the lock every
// claim takes, so exactly one wins however they interleave.
func TestMaxRunsHoldsWhenClaimsRace(t *testing.T) {
	t.Parallel()
	db, now := openAsLeader(t)
	ctx := context.Background()
	for round := range 20 {
		job := "race-" + string(rune('a'+round))
		var wg sync.WaitGroup
		outs := make([]store.ClaimOutcome, 8)
		for i := range outs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				c := store.Claim{Job: job, ScheduledAt: now.Add(-time.Duration(i+1) * time.Second), Trigger: store.TriggerSchedule,
					InstanceID: "a", MaxRuns: 1}
				assert.NoError(t, db.Fenced(ctx, store.Fence{Epoch: 1}, func(tx *store.Tx) error {
					var err error
					if i%2 == 0 {
						outs[i], err = tx.ClaimSlot(ctx, c)
						return err
					}
					var o []store.ClaimOutcome
					o, err = tx.ClaimSlots(ctx, []store.Claim{c})
					if err == nil {
						outs[i] = o[0]
					}
					return err
				}))
				// The run ends at once, so the one-active-run index cannot be what stops the others.
				if outs[i].Run != nil {
					_, err := db.Pool.Exec(ctx, `UPDATE job_runs SET status = 'succeeded', finished_at = now() WHERE id = $1`, outs[i].Run.ID)
					assert.NoError(t, err)
				}
			}()
		}
		wg.Wait()
		assert.Equal(t, 1, countRows(t, db, `SELECT count(*) FROM job_runs WHERE job = $1 AND status IN ('running', 'succeeded')`, job),
			"round %d: exactly one run", round)
	}
}

func normalise(m map[string]store.RanRuns) map[string]store.RanRuns {
	for k, v := range m {
		v.Last = v.Last.UTC()
		m[k] = v
	}
	return m
}

func countRows(t *testing.T, db *testdb.DB, sql string, args ...any) int {
	t.Helper()
	var n int
	require.NoError(t, db.Pool.QueryRow(context.Background(), sql, args...).Scan(&n))
	return n
}
