package main

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schedulerhq/scheduler/internal/jobcontract"
	"github.com/schedulerhq/scheduler/internal/store"
	"github.com/schedulerhq/scheduler/internal/store/storetest"
	"github.com/schedulerhq/scheduler/replica/replicatest"
)

// backfill lists, then runs, a built-in job's missed slots; rerun runs one run's slot again;
// a run that did no slot is refused with what to do instead.
func TestBackfillAndRerunCommands(t *testing.T) {
	t.Parallel()
	srv := replicatest.Start(t, replicatest.Options{Token: cliToken, Extra: []jobcontract.Job{
		replicatest.Quick{JobName: "quick", Schedule: "0 * * * *"},
	}, Paused: []string{"quick"}})
	env := []string{"SCHEDULER_URL=" + srv.URL, "SCHEDULER_API_TOKEN=" + cliToken}
	hour := time.Now().UTC().Truncate(time.Hour)
	ctx := context.Background()
	for _, h := range []int{3, 2} {
		storetest.Run(ctx, t, srv.DB.Pool, storetest.RunOpts{Job: "quick", Status: store.StatusMissed,
			ScheduledAt: hour.Add(time.Duration(-h) * time.Hour), FinishedAt: time.Now()})
	}
	since, until := hour.Add(-3*time.Hour).Format(time.RFC3339), hour.Add(-90*time.Minute).Format(time.RFC3339)

	code, out, stderr := runCLI(t, env, "backfill", "quick", "--since", since, "--until", until, "--dry-run")
	require.Equal(t, exitOK, code, stderr)
	assert.Equal(t, "would run 2 slots of quick, oldest first:\n  "+since+"\n  "+hour.Add(-2*time.Hour).Format(time.RFC3339)+"\n", out)

	code, out, stderr = runCLI(t, env, "backfill", "quick", "--since", since, "--until", until)
	require.Equal(t, exitOK, code, stderr)
	assert.Regexp(t, `^backfill \d+ runs 2 slots of quick, one at a time, oldest first`, out)
	require.Eventually(t, func() bool {
		var n int
		require.NoError(t, srv.DB.Pool.QueryRow(ctx, `SELECT count(*) FROM job_runs WHERE job = 'quick' AND trigger = 'backfill' AND status = 'succeeded'`).Scan(&n))
		return n == 2
	}, 30*time.Second, 50*time.Millisecond)

	code, out, stderr = runCLI(t, env, "backfill", "quick", "--since", since, "--until", until)
	require.Equal(t, exitOK, code, stderr)
	assert.Contains(t, out, "nothing to run")

	var missed int64
	// The missed row of the window's first slot: the replica's catch-up may have recorded the
	// current hour's slot missed too (the job is paused), so the row is named by its slot.
	require.NoError(t, srv.DB.Pool.QueryRow(ctx, `SELECT id FROM job_runs WHERE job = 'quick' AND status = 'missed' AND scheduled_at = $1`,
		hour.Add(-3*time.Hour)).Scan(&missed))
	code, out, stderr = runCLI(t, env, "rerun", strconv.FormatInt(missed, 10))
	require.Equal(t, exitOK, code, stderr)
	assert.Contains(t, out, "the slot of "+since+" again, with its Idempotency-Key")

	require.Eventually(t, func() bool {
		var n int
		require.NoError(t, srv.DB.Pool.QueryRow(ctx, `SELECT count(*) FROM job_runs WHERE job = 'quick' AND status IN ('queued', 'running')`).Scan(&n))
		return n == 0
	}, 30*time.Second, 50*time.Millisecond, "the re-run ends")
	code, _, stderr = runCLI(t, env, "trigger", "quick", "--wait", "30s")
	require.Equal(t, exitOK, code, stderr)
	var manual int64
	require.NoError(t, srv.DB.Pool.QueryRow(ctx, `SELECT id FROM job_runs WHERE job = 'quick' AND trigger = 'manual'`).Scan(&manual))
	code, _, stderr = runCLI(t, env, "rerun", strconv.FormatInt(manual, 10))
	assert.Equal(t, exitFailure, code)
	assert.Contains(t, stderr, "did no slot (a manual run); trigger the job again instead")
}
