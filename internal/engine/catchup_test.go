package engine

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schedulerhq/scheduler/internal/config"
	"github.com/schedulerhq/scheduler/internal/store"
	"github.com/schedulerhq/scheduler/internal/store/storetest"
)

// Guarantees 3 and 10 after more than three days without a leader (or a restored backup):
// the slots of the outage fall on days whose partition of job_runs nobody created. Catch-up
// creates them and records the slots; it used to fail the whole batch of jobs at every
// election, so every job of the batch lost its catch-up (issue 28, 2).
func TestCatchUpRecordsSlotsOnDaysWithoutAPartition(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, url := newDB(t)
	hourly := jobConfig(t, "tick", "@every 1h", time.Minute)
	now, err := db.Now(ctx)
	require.NoError(t, err)
	latest := hourly.Schedule.Prev(now)
	first := latest.Add(-96 * time.Hour)
	storetest.Run(ctx, t, db.Pool, storetest.RunOpts{Job: "tick", Status: store.StatusSucceeded, ScheduledAt: first,
		StartedAt: first, FinishedAt: first, InstanceID: "old", Epoch: storetest.Ptr(int64(0))})
	gapDay := latest.Add(-48 * time.Hour).UTC().Format("20060102")
	// A test database is a copy of a template migrated once per schema, which on a long-lived
	// test cluster may have been the day before: its days then reach two days back.
	_, err = db.Pool.Exec(ctx, fmt.Sprintf(`DROP TABLE IF EXISTS job_runs_p%[1]s, run_attempts_p%[1]s`, gapDay))
	require.NoError(t, err)
	require.Zero(t, count(t, db, `SELECT count(*) FROM pg_class WHERE relname = $1`, "job_runs_p"+gapDay),
		"precondition: the day two days ago has no partition")

	n := startNode(t, url, "a", nodeOptions{jobs: []config.Job{hourly, jobConfig(t, "writer", "@every 1h", time.Minute)}})
	awaitSignal(t, &n.en.testSignals.leading, "leading after catching up")

	assert.Equal(t, 95, count(t, db, `SELECT count(*) FROM job_runs WHERE job = 'tick' AND status = 'missed'`),
		"every slot of the outage but the latest is recorded missed")
	assert.Equal(t, 1, count(t, db, `SELECT count(*) FROM job_runs WHERE job = 'tick' AND scheduled_at = $1 AND trigger = 'catch-up'`, latest),
		"the latest slot is caught up")
	assert.Equal(t, 1, count(t, db, `SELECT count(*) FROM job_runs WHERE job = 'writer' AND scheduled_at = $1 AND trigger = 'catch-up'`, latest),
		"the other job of the batch is caught up")
}

// One job whose catch-up cannot be recorded does not take the catch-up of the others in its
// batch with it.
func TestOneJobsFailedCatchUpLeavesTheOthersAlone(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, url := newDB(t)
	// Whatever makes one job's rows fail (here a trigger) fails that job only.
	_, err := db.Pool.Exec(ctx, `
		CREATE FUNCTION test_refuse_broken() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN
			IF NEW.job = 'chatty' THEN RAISE EXCEPTION 'the chatty job cannot be recorded'; END IF;
			RETURN NEW;
		END $$;
		CREATE TRIGGER test_refuse_broken BEFORE INSERT ON job_runs FOR EACH ROW EXECUTE FUNCTION test_refuse_broken();`)
	require.NoError(t, err)
	jobs := []config.Job{jobConfig(t, "chatty", "@every 1h", time.Minute), jobConfig(t, "tick", "@every 1h", time.Minute), jobConfig(t, "writer", "@every 1h", time.Minute)}
	now, err := db.Now(ctx)
	require.NoError(t, err)
	latest := jobs[0].Schedule.Prev(now)

	n := startNode(t, url, "a", nodeOptions{jobs: jobs})
	awaitSignal(t, &n.en.testSignals.leading, "leading after catching up")

	for _, name := range []string{"tick", "writer"} {
		assert.Equal(t, 1, count(t, db, `SELECT count(*) FROM job_runs WHERE job = $1 AND scheduled_at = $2 AND trigger = 'catch-up'`, name, latest),
			"%s is caught up although chatty's catch-up failed", name)
	}
	assert.Zero(t, count(t, db, `SELECT count(*) FROM job_runs WHERE job = 'chatty'`))
}

// clockAt is where the seam tests stop the leader's clock: a fixed instant, 30 s past a
// minute, so every slot they expect is known exactly.
var clockAt = time.Date(2026, 3, 2, 10, 0, 30, 0, time.UTC)

// Guarantee 3 on the engine's clock (clock): after 200 minutes without a leader, the
// election's catch-up runs the latest slot once and records exactly the 100 slots before it
// missed, at the clock's time, and nothing before them.
func TestCatchUpOnTheClockRecordsExactlyTheCappedSlots(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, url := newDB(t)
	latest := clockAt.Truncate(time.Minute)
	first := latest.Add(-200 * time.Minute)
	storetest.Run(ctx, t, db.Pool, storetest.RunOpts{Job: "tick", Status: store.StatusSucceeded,
		ScheduledAt: first, StartedAt: first, FinishedAt: first, InstanceID: "old", Epoch: storetest.Ptr(int64(0))})

	n := startNode(t, url, "a", nodeOptions{jobs: []config.Job{jobConfig(t, "tick", "* * * * *", time.Minute)}, now: clockAt})
	assert.Equal(t, 1, awaitSignal(t, &n.en.testSignals.caughtUp, "the catch-up"))

	rows, err := db.Pool.Query(ctx, `SELECT scheduled_at FROM job_runs WHERE job = 'tick' AND status = 'missed' ORDER BY scheduled_at`)
	require.NoError(t, err)
	missed, err := pgx.CollectRows(rows, pgx.RowTo[time.Time])
	require.NoError(t, err)
	want := make([]time.Time, 100)
	for i := range want {
		want[i] = latest.Add(time.Duration(i-100) * time.Minute)
	}
	assert.Equal(t, want, utc(missed), "the 100 slots before the latest, recorded missed")
	assert.Equal(t, 100, count(t, db, `SELECT count(*) FROM job_runs WHERE status = 'missed' AND finished_at = $1`, clockAt),
		"at the clock's time")
	assert.Equal(t, 1, count(t, db, `SELECT count(*) FROM job_runs WHERE job = 'tick' AND scheduled_at = $1 AND trigger = 'catch-up' AND started_at = $2`,
		latest, clockAt), "the latest slot is caught up, once, claimed at the clock's time")
	assert.Equal(t, 102, count(t, db, `SELECT count(*) FROM job_runs WHERE job = 'tick' AND scheduled_at <= $1`, clockAt),
		"no other slot up to the clock has a row")
}
