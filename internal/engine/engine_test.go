package engine

import (
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schedulerhq/scheduler/internal/config"
	"github.com/schedulerhq/scheduler/internal/logging"
	"github.com/schedulerhq/scheduler/internal/pglisten"
	"github.com/schedulerhq/scheduler/internal/store"
	"github.com/schedulerhq/scheduler/internal/store/storetest"
)

// manualOnly is a job that never fires on its own during a test: hourly, no catch-up.
func manualOnly(t *testing.T, name string, timeout time.Duration) config.Job {
	j := jobConfig(t, name, "@every 1h", timeout)
	j.Catchup = 0
	return j
}

func TestNewRefusesBadJobConfig(t *testing.T) {
	t.Parallel()
	db := &store.DB{}
	for name, tc := range map[string]struct {
		jobs []config.Job
		want string
	}{
		"unknown job":      {[]config.Job{jobConfig(t, "no-such-job", "@every 1s", time.Second)}, `job "no-such-job" is configured but not registered`},
		"zero timeout":     {[]config.Job{jobConfig(t, "tick", "@every 1s", 0)}, `job "tick": timeout 0s must be above 0`},
		"negative timeout": {[]config.Job{jobConfig(t, "tick", "@every 1s", -time.Second)}, `job "tick": timeout -1s must be above 0`},
		"twice":            {[]config.Job{jobConfig(t, "tick", "@every 1s", time.Second), jobConfig(t, "tick", "@every 2s", time.Second)}, `job "tick" is configured twice`},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := New(Config{DB: db, Notifier: pglisten.New(db, nil), Registry: registry, InstanceID: "x", PollInterval: config.PollIntervalDefault, Jobs: tc.jobs})
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
	_, err := New(Config{DB: db, Notifier: pglisten.New(db, nil), Registry: registry, InstanceID: "x", PollInterval: config.PollIntervalDefault, Jobs: []config.Job{jobConfig(t, "tick", "@every 1s", time.Second)}})
	assert.NoError(t, err, "a valid configuration is accepted")
}

func TestManualRunIsPickedUpByNotify(t *testing.T) {
	t.Parallel()
	db, url := newDB(t)
	// Polling once an hour: only the NOTIFY can make the leader pick the run up in time.
	n := startNode(t, url, "a", nodeOptions{jobs: []config.Job{manualOnly(t, "tick", time.Minute)}, pollInterval: time.Hour})
	term := awaitTerm(t, n)
	awaitSignal(t, &n.en.testSignals.leading, "leading")

	id := queueRun(t, db, "tick")
	r := awaitStatus(t, db, id, store.StatusSucceeded)
	assert.Equal(t, store.TriggerManual, r.Trigger)
	assert.Equal(t, term.Epoch, *r.Epoch)
	assert.Equal(t, "a", *r.InstanceID)
	assert.JSONEq(t, `{"processed":1,"changed":1,"skipped_locked":0,"errors":0}`, string(r.Stats))
	assert.Nil(t, r.Error)
	assert.Equal(t, 1, count(t, db, `SELECT count(*) FROM test_calls WHERE run_id = $1`, id))
}

func TestTimeoutCancelsRunAsTimedOut(t *testing.T) {
	t.Parallel()
	db, url := newDB(t)
	n := startNode(t, url, "a", nodeOptions{jobs: []config.Job{manualOnly(t, "slow", 300*time.Millisecond)}})
	awaitSignal(t, &n.en.testSignals.leading, "leading")

	id := queueRun(t, db, "slow")
	r := awaitStatus(t, db, id, store.StatusTimedOut)
	require.NotNil(t, r.Error)
	assert.Contains(t, *r.Error, "timed out after")
	assert.GreaterOrEqual(t, r.FinishedAt.Sub(*r.StartedAt), 300*time.Millisecond)
}

func TestPanicFailsRunAndEngineKeepsRunning(t *testing.T) {
	t.Parallel()
	db, url := newDB(t)
	n := startNode(t, url, "a", nodeOptions{jobs: []config.Job{
		manualOnly(t, "boom", time.Minute), manualOnly(t, "tick", time.Minute),
	}})
	awaitSignal(t, &n.en.testSignals.leading, "leading")

	boom := awaitStatus(t, db, queueRun(t, db, "boom"), store.StatusFailed)
	require.NotNil(t, boom.Error)
	msg, stack, _ := strings.Cut(*boom.Error, "\n\n")
	assert.Equal(t, "panic: boom: the job body blew up", msg)
	// The stack is stored with the error, bounded, and names the frame that panicked.
	assert.Contains(t, stack, "panicJob.Run")
	assert.LessOrEqual(t, len(stack), maxStoredStack+100)

	awaitStatus(t, db, queueRun(t, db, "tick"), store.StatusSucceeded)
	isLeader, _ := n.el.IsLeader()
	assert.True(t, isLeader, "a panicking job must not cost the replica its leadership")
}

// A panic on a goroutine the job started (here a walk's applier) fails the run as one in
// the job body does; unrecovered, it would end the process (and this test binary).
func TestPanicOnAJobsGoroutineFailsRunAndEngineKeepsRunning(t *testing.T) {
	t.Parallel()
	db, url := newDB(t)
	logs := &syncBuffer{}
	n := startNode(t, url, "a", nodeOptions{
		jobs: []config.Job{manualOnly(t, "walk-boom", time.Minute), manualOnly(t, "tick", time.Minute)},
		log:  logging.New(logs, slog.LevelInfo, logging.FormatJSON),
	})
	awaitSignal(t, &n.en.testSignals.leading, "leading")

	id := queueRun(t, db, "walk-boom")
	boom := awaitStatus(t, db, id, store.StatusFailed)
	require.NotNil(t, boom.Error)
	msg, stack, _ := strings.Cut(*boom.Error, "\n\n")
	assert.Equal(t, "walk-boom batch 2: panic: assignment to entry in nil map", msg)
	assert.Contains(t, stack, "walkPanicJob.Run", "the stack of the walk's goroutine, where it panicked")
	var logged []map[string]any
	for _, line := range logs.lines(t) {
		if line["msg"] == "job panicked" {
			logged = append(logged, line)
		}
	}
	require.Len(t, logged, 1)
	assert.EqualValues(t, id, logged[0]["run_id"], "logged with the run's id")
	assert.Contains(t, logged[0]["stack"], "walkPanicJob.Run")

	awaitStatus(t, db, queueRun(t, db, "tick"), store.StatusSucceeded)
	isLeader, _ := n.el.IsLeader()
	assert.True(t, isLeader, "a panicking job must not cost the replica its leadership")
}

func TestCancelRequestEndsRunningRunAsCancelled(t *testing.T) {
	t.Parallel()
	db, url := newDB(t)
	n := startNode(t, url, "a", nodeOptions{jobs: []config.Job{manualOnly(t, "slow", time.Minute)}, pollInterval: time.Hour})
	awaitSignal(t, &n.en.testSignals.leading, "leading")

	id := queueRun(t, db, "slow")
	require.Eventually(t, func() bool {
		return count(t, db, `SELECT count(*) FROM test_calls WHERE run_id = $1`, id) == 1
	}, waitTimeout, 10*time.Millisecond, "the run starts")
	_, err := db.Pool.Exec(context.Background(), `UPDATE job_runs SET cancel_requested = true WHERE id = $1`, id)
	require.NoError(t, err)

	r := awaitStatus(t, db, id, store.StatusCancelled)
	assert.Less(t, r.FinishedAt.Sub(*r.StartedAt), time.Minute, "cancelled, not timed out")
}

func TestOverlappingSlotIsSkipped(t *testing.T) {
	t.Parallel()
	db, url := newDB(t)
	j := jobConfig(t, "slow", "@every 1s", time.Minute)
	j.Catchup = 0
	startNode(t, url, "a", nodeOptions{jobs: []config.Job{j}})

	require.Eventually(t, func() bool {
		return count(t, db, `SELECT count(*) FROM job_runs WHERE job = 'slow' AND status = 'skipped' AND reason = 'overlap'`) >= 2
	}, waitTimeout, 20*time.Millisecond)
	var running *store.Run
	for _, r := range runsOf(t, db, "slow") {
		switch r.Status {
		case store.StatusRunning:
			require.Nil(t, running, "at most one run of a job at a time")
			running = r
		case store.StatusSkipped:
			require.NotNil(t, running, "skips come after the run they overlap")
			assert.True(t, r.ScheduledAt.After(*running.ScheduledAt))
		}
	}
	require.NotNil(t, running)
}

func TestPausedJobSlotsAreSkipped(t *testing.T) {
	t.Parallel()
	db, url := newDB(t)
	_, err := db.Pool.Exec(context.Background(), `INSERT INTO job_settings (job, paused) VALUES ('tick', true)`)
	require.NoError(t, err)
	startNode(t, url, "a", nodeOptions{jobs: []config.Job{jobConfig(t, "tick", "@every 1s", time.Minute)}})

	require.Eventually(t, func() bool {
		return count(t, db, `SELECT count(*) FROM job_runs WHERE job = 'tick' AND status = 'skipped' AND reason = 'paused'`) >= 2
	}, waitTimeout, 20*time.Millisecond)
	assert.Zero(t, count(t, db, `SELECT count(*) FROM test_calls`), "a paused job must not run")
}

func TestMinGapSkipsSlotsTooSoonAfterTheLastStart(t *testing.T) {
	t.Parallel()
	db, url := newDB(t)
	j := jobConfig(t, "tick", "@every 1s", time.Minute)
	j.Catchup = 0
	j.MinGap = 2500 * time.Millisecond
	startNode(t, url, "a", nodeOptions{jobs: []config.Job{j}})

	require.Eventually(t, func() bool {
		return count(t, db, `SELECT count(*) FROM job_runs WHERE job = 'tick' AND status = 'succeeded'`) >= 2
	}, waitTimeout, 20*time.Millisecond)
	var starts []time.Time
	skipped := 0
	for _, r := range runsOf(t, db, "tick") {
		switch {
		case r.Status == store.StatusSucceeded:
			starts = append(starts, *r.StartedAt)
		case r.Status == store.StatusSkipped && *r.Reason == store.ReasonMinGap:
			skipped++
		}
	}
	assert.GreaterOrEqual(t, skipped, 2, "the slots between two runs are skipped for min-gap")
	for i := 1; i < len(starts); i++ {
		assert.GreaterOrEqual(t, starts[i].Sub(starts[i-1]), j.MinGap)
	}
}

func TestCatchUpRunsLatestMissedSlotAndRecordsOlderOnes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, url := newDB(t)
	// Both jobs last ran five hours ago; "tick" may catch up within an hour, "boom" not at all.
	now := time.Now()
	slot := now.Truncate(time.Hour).Add(-5 * time.Hour)
	storetest.Runs(ctx, t, db.Pool,
		storetest.RunOpts{Job: "tick", Status: store.StatusSucceeded, ScheduledAt: slot, StartedAt: now, FinishedAt: now},
		storetest.RunOpts{Job: "boom", Status: store.StatusSucceeded, ScheduledAt: slot, StartedAt: now, FinishedAt: now})
	tick := jobConfig(t, "tick", "@every 1h", time.Minute)
	boom := jobConfig(t, "boom", "@every 1h", time.Minute)
	boom.Catchup = 0
	n := startNode(t, url, "a", nodeOptions{jobs: []config.Job{tick, boom}, maxMissed: 3})
	awaitSignal(t, &n.en.testSignals.leading, "leading")

	var caughtUp *store.Run
	var missed []time.Time
	for _, r := range runsOf(t, db, "tick")[1:] {
		switch r.Status {
		case store.StatusMissed:
			missed = append(missed, *r.ScheduledAt)
		default:
			require.Nil(t, caughtUp, "only the latest missed slot runs")
			caughtUp = r
		}
	}
	require.NotNil(t, caughtUp)
	assert.Equal(t, store.TriggerCatchUp, caughtUp.Trigger)
	latest := caughtUp.ScheduledAt.UTC()
	assert.Equal(t, []time.Time{latest.Add(-3 * time.Hour), latest.Add(-2 * time.Hour), latest.Add(-time.Hour)}, utc(missed),
		"the older misses are recorded, at most maxMissed of them")
	awaitStatus(t, db, caughtUp.ID, store.StatusSucceeded)

	boomRuns := runsOf(t, db, "boom")[1:]
	var boomMissed []time.Time
	for _, r := range boomRuns {
		assert.Equal(t, store.StatusMissed, r.Status, "with catch-up disabled nothing runs")
		boomMissed = append(boomMissed, *r.ScheduledAt)
	}
	assert.Equal(t, []time.Time{latest.Add(-3 * time.Hour), latest.Add(-2 * time.Hour), latest.Add(-time.Hour), latest}, utc(boomMissed))
}

func utc(ts []time.Time) []time.Time {
	out := make([]time.Time, len(ts))
	for i, t := range ts {
		out[i] = t.UTC()
	}
	return out
}

func TestAbandonedRunIsRecoveredOnce(t *testing.T) {
	t.Parallel()
	db, url := newDB(t)
	// A run left running by a leader of epoch 0, which died.
	abandoned := storetest.Run(context.Background(), t, db.Pool, storetest.RunOpts{Job: "tick", Status: store.StatusRunning,
		StartedAt: time.Now().Add(-time.Minute), InstanceID: "dead", Epoch: storetest.Ptr(int64(0))}).ID
	opts := nodeOptions{jobs: []config.Job{manualOnly(t, "tick", time.Minute)}}

	a := startNode(t, url, "a", opts)
	awaitSignal(t, &a.en.testSignals.leading, "a leading")
	r := getRun(t, db, abandoned)
	assert.Equal(t, store.StatusAbandoned, r.Status)
	var recovery int64
	require.NoError(t, db.Pool.QueryRow(context.Background(),
		`SELECT id FROM job_runs WHERE recovers_run_id = $1 AND trigger = 'recovery'`, abandoned).Scan(&recovery))
	awaitStatus(t, db, recovery, store.StatusSucceeded)
	a.stop()

	// The next leader finds nothing left to recover.
	b := startNode(t, url, "b", opts)
	term := awaitTerm(t, b)
	assert.Equal(t, int64(2), term.Epoch)
	awaitSignal(t, &b.en.testSignals.leading, "b leading")
	assert.Equal(t, 1, count(t, db, `SELECT count(*) FROM job_runs WHERE trigger = 'recovery'`))
	assert.Equal(t, 1, count(t, db, `SELECT count(*) FROM test_calls`), "the job body ran once, in the recovery run")
}

// A yearly job's slot that succeeded long ago is not run again at the next election once
// data-retention has purged the expired runs: the purge keeps each job's newest slot row,
// which catch-up decides from, and deletes the job's older rows.
func TestRetentionDoesNotMakeTheNextLeaderRerunAYearlySlot(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, url := newDB(t)
	yearly := jobConfig(t, "tick", "0 0 1 1 *", time.Minute) // catch-up window: one period, a year
	latest := yearly.Schedule.Prev(time.Now())
	older := yearly.Schedule.Prev(latest.Add(-time.Second))
	storetest.Runs(ctx, t, db.Pool,
		storetest.RunOpts{Job: "tick", Status: store.StatusSucceeded, ScheduledAt: older, StartedAt: older, FinishedAt: older.Add(time.Second)},
		storetest.RunOpts{Job: "tick", Status: store.StatusSucceeded, ScheduledAt: latest, StartedAt: latest, FinishedAt: latest.Add(time.Second)})
	// Data-retention counts a dropped day's rows by PostgreSQL's estimate.
	_, err := db.Pool.Exec(ctx, `ANALYZE job_runs`)
	require.NoError(t, err)
	nodeJobs := []config.Job{yearly, manualOnly(t, "data-retention", time.Minute)}

	a := startNode(t, url, "a", nodeOptions{jobs: nodeJobs})
	awaitSignal(t, &a.en.testSignals.leading, "leading")
	purge, _, err := db.QueueManualRun(ctx, "data-retention", nil, []byte(`{}`))
	require.NoError(t, err)
	r := awaitStatus(t, db, purge.ID, store.StatusSucceeded)
	assert.JSONEq(t, `1`, string(mustField(t, r.Stats, "detail", "job_runs")), "the older slot row of tick was purged")
	a.stop()

	b := startNode(t, url, "b", nodeOptions{jobs: nodeJobs})
	awaitSignal(t, &b.en.testSignals.leading, "leading")
	runs := runsOf(t, db, "tick")
	require.Len(t, runs, 1, "no catch-up run of a slot that ran: %v", runs)
	assert.Equal(t, latest.UTC(), runs[0].ScheduledAt.UTC())
	assert.Equal(t, store.StatusSucceeded, runs[0].Status)
}

// mustField digs a value out of a JSON object by keys.
func mustField(t *testing.T, raw []byte, keys ...string) json.RawMessage {
	t.Helper()
	v := json.RawMessage(raw)
	for _, k := range keys {
		var m map[string]json.RawMessage
		require.NoError(t, json.Unmarshal(v, &m), "%s", v)
		v = m[k]
	}
	return v
}
