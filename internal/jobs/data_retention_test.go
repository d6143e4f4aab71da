package jobs_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schedulerhq/scheduler/internal/jobs"
	"github.com/schedulerhq/scheduler/internal/store"
	"github.com/schedulerhq/scheduler/internal/store/storetest"
	"github.com/schedulerhq/scheduler/internal/testdb"
)

const day = 24 * time.Hour

// runDays is data-retention's RunDays on db, as the replica wires them, with windows as
// every job's catch-up windows.
func runDays(db *testdb.DB, windows map[string]time.Duration) jobs.RunDays {
	return jobs.RunDays{
		CatchUpWindows: func() map[string]time.Duration { return windows },
		Drop:           db.DropRunDays,
	}
}

// seedRetention fills every purged table with rows to delete (marked 'old') and rows to keep
// (marked 'keep'), relative to runNow and the default windows, and returns how many of each
// table must go.
func seedRetention(t *testing.T, pool *pgxpool.Pool) map[string]int64 {
	t.Helper()
	ctx := context.Background()
	// job_runs: 11 runs of a day 40 days ago; kept: 4 of a day 29 days ago, an old queued
	// and an old running run (which keep their day, 60 days ago, whole), and a recent
	// recovery run of an old run.
	var runs []storetest.RunOpts
	for i := 1; i <= 11; i++ {
		at := runNow.AddDate(0, 0, -40)
		runs = append(runs, storetest.RunOpts{Job: "j", Status: []string{store.StatusSucceeded, store.StatusFailed,
			store.StatusSkipped, store.StatusCancelled}[i%4], CreatedAt: at, StartedAt: at,
			FinishedAt: runNow.AddDate(0, 0, -31).Add(time.Duration(-i) * time.Hour), Reason: "old"})
	}
	for range 4 {
		at := runNow.AddDate(0, 0, -29)
		runs = append(runs, storetest.RunOpts{Job: "j", Status: store.StatusSucceeded, CreatedAt: at, StartedAt: at,
			FinishedAt: at, Reason: "keep"})
	}
	runs = append(runs,
		storetest.RunOpts{Job: "q", Status: store.StatusQueued, CreatedAt: runNow.AddDate(0, 0, -60), Reason: "keep"},
		storetest.RunOpts{Job: "r", Status: store.StatusRunning, CreatedAt: runNow.AddDate(0, 0, -60), Reason: "keep"})
	old := storetest.Runs(ctx, t, pool, runs...)[0]
	storetest.Run(ctx, t, pool, storetest.RunOpts{Job: "j", Trigger: store.TriggerRecovery, Status: store.StatusSucceeded,
		CreatedAt: runNow, FinishedAt: runNow, RecoversRunID: old.ID, Reason: "keep"})
	for _, q := range []string{
		// idempotency_keys: 13 expired, 5 still valid; the scope says which.
		`INSERT INTO idempotency_keys (key, scope, request_hash, expires_at)
		 SELECT gen_random_uuid(), 'old', 'h', $1::timestamptz - i * interval '1 hour' FROM generate_series(1, 13) i`,
		`INSERT INTO idempotency_keys (key, scope, request_hash, expires_at)
		 SELECT gen_random_uuid(), 'keep', 'h', $1::timestamptz + i * interval '1 minute' FROM generate_series(1, 5) i`,
		// The estimates DropRunDays reports the dropped rows by.
		`ANALYZE job_runs`,
		// leads: 9 abandoned more than 180 days ago; kept: 2 abandoned recently, 3 old submitted
		// leads and 2 old leads never claimed.
		`INSERT INTO tenants (name) VALUES ('t')`,
		`INSERT INTO forms (tenant_id, name) SELECT id, 'f' FROM tenants`,
		`INSERT INTO leads (form_id, tenant_id, session_id, email, started_at, abandoned_at)
		 SELECT f.id, f.tenant_id, 'old-' || i, 'x@example.com', $1::timestamptz - interval '200 days',
		        $1::timestamptz - interval '181 days'
		 FROM forms f, generate_series(1, 9) i`,
		`INSERT INTO leads (form_id, tenant_id, session_id, email, started_at, abandoned_at)
		 SELECT f.id, f.tenant_id, 'keep-abandoned-' || i, 'x@example.com', $1::timestamptz - interval '10 days',
		        $1::timestamptz - interval '10 days'
		 FROM forms f, generate_series(1, 2) i`,
		`INSERT INTO leads (form_id, tenant_id, session_id, email, started_at, submitted_at)
		 SELECT f.id, f.tenant_id, 'keep-submitted-' || i, 'x@example.com', $1::timestamptz - interval '400 days',
		        $1::timestamptz - interval '400 days'
		 FROM forms f, generate_series(1, 3) i`,
		`INSERT INTO leads (form_id, tenant_id, session_id, email, started_at)
		 SELECT f.id, f.tenant_id, 'keep-unclaimed-' || i, 'x@example.com', $1::timestamptz - interval '400 days'
		 FROM forms f, generate_series(1, 2) i`,
		// message_deliveries: 7 older than 90 days; kept: 3 newer, one of them for an old lead.
		`INSERT INTO message_deliveries (provider, channel, "to", template, payload_hash, payload, created_at)
		 SELECT 'p', 'EMAIL', 'x@example.com', 'old', 'h' || i, '{}', $1::timestamptz - interval '91 days'
		 FROM generate_series(1, 7) i`,
		`INSERT INTO message_deliveries (provider, channel, "to", template, payload_hash, payload, created_at, lead_id)
		 SELECT 'p', 'EMAIL', 'x@example.com', 'keep', 'k' || i, '{}', $1::timestamptz - interval '89 days',
		        (SELECT min(id) FROM leads WHERE session_id LIKE 'old-%')
		 FROM generate_series(1, 3) i`,
		// operator_actions: 5 older than 365 days; kept: 2 newer.
		`INSERT INTO operator_actions (at, action, token_kind, reason, request_id, remote_addr)
		 SELECT $1::timestamptz - interval '366 days' - i * interval '1 day', 'pause', 'full', 'old', 'r', '127.0.0.1'
		 FROM generate_series(1, 5) i`,
		`INSERT INTO operator_actions (at, action, token_kind, reason, request_id, remote_addr)
		 SELECT $1::timestamptz - interval '364 days', 'resume', 'full', 'keep', 'r', '127.0.0.1'
		 FROM generate_series(1, 2) i`,
		// Notifications (with the runs' window, 30 days): 3 old events and 2 old messages;
		// kept: a new event, an old event still waiting, a new message and an old one pending.
		`INSERT INTO scheduler_notifications (job, event, detail, created_at, grouped_at)
		 SELECT 'j', 'paused', 'old', $1::timestamptz - interval '31 days', $1::timestamptz - interval '31 days'
		 FROM generate_series(1, 3) i`,
		`INSERT INTO scheduler_notifications (job, event, detail, created_at, grouped_at)
		 VALUES ('j', 'paused', 'keep', $1::timestamptz - interval '1 day', $1::timestamptz - interval '1 day'),
		        ('j', 'paused', 'keep', $1::timestamptz - interval '31 days', NULL)`,
		`INSERT INTO scheduler_notification_deliveries (job, event, kind, url, run_ids, count, body, status, created_at)
		 SELECT 'j', 'paused', 'webhook', 'old', '{}', 1, '{}', 'sent', $1::timestamptz - interval '31 days'
		 FROM generate_series(1, 2) i`,
		`INSERT INTO scheduler_notification_deliveries (job, event, kind, url, run_ids, count, body, status, created_at)
		 VALUES ('j', 'paused', 'webhook', 'keep', '{}', 1, '{}', 'failed', $1::timestamptz - interval '1 day'),
		        ('j', 'paused', 'webhook', 'keep', '{}', 1, '{}', 'pending', $1::timestamptz - interval '31 days')`,
	} {
		var args []any
		if strings.Contains(q, "$1") {
			args = append(args, runNow)
		}
		_, err := pool.Exec(ctx, q, args...)
		require.NoError(t, err, q)
	}
	return map[string]int64{"idempotency_keys": 13, "job_runs": 11, "message_deliveries": 7, "leads": 9, "operator_actions": 5,
		"scheduler_notifications": 3, "scheduler_notification_deliveries": 2}
}

// remaining counts each table's rows by marker: what is left of the 'old' rows and the 'keep' ones.
func remaining(t *testing.T, pool *pgxpool.Pool) map[string]int64 {
	t.Helper()
	var out = map[string]int64{}
	for table, q := range map[string]string{
		"idempotency_keys":                  `SELECT count(*) FILTER (WHERE scope = 'old'), count(*) FILTER (WHERE scope = 'keep') FROM idempotency_keys`,
		"job_runs":                          `SELECT count(*) FILTER (WHERE reason = 'old'), count(*) FILTER (WHERE reason = 'keep') FROM job_runs`,
		"message_deliveries":                `SELECT count(*) FILTER (WHERE template = 'old'), count(*) FILTER (WHERE template = 'keep') FROM message_deliveries`,
		"leads":                             `SELECT count(*) FILTER (WHERE session_id LIKE 'old-%'), count(*) FILTER (WHERE session_id LIKE 'keep-%') FROM leads`,
		"operator_actions":                  `SELECT count(*) FILTER (WHERE reason = 'old'), count(*) FILTER (WHERE reason = 'keep') FROM operator_actions`,
		"scheduler_notifications":           `SELECT count(*) FILTER (WHERE detail = 'old'), count(*) FILTER (WHERE detail = 'keep') FROM scheduler_notifications`,
		"scheduler_notification_deliveries": `SELECT count(*) FILTER (WHERE url = 'old'), count(*) FILTER (WHERE url = 'keep') FROM scheduler_notification_deliveries`,
	} {
		var old, keep int64
		require.NoError(t, pool.QueryRow(context.Background(), q).Scan(&old, &keep))
		out[table+" old"] = old
		out[table+" keep"] = keep
	}
	return out
}

func TestDataRetentionDeletesExactlyTheExpiredRowsInBatches(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, _ := testdb.Open(t, store.Options{})
	want := seedRetention(t, db.Pool)
	before := remaining(t, db.Pool)
	j := jobs.NewDataRetention(jobs.RetentionSettings{BatchSize: 4, Pause: time.Millisecond}, runDays(db, nil))

	env := newEnv(t, db, "data-retention") // its own run is running, so it is kept
	env.Params.DryRun = true
	dry, err := j.Run(ctx, env)
	require.NoError(t, err)
	for table, n := range want {
		assert.Equal(t, n, dry.Detail[table], "dry run count of %s", table)
	}
	assert.Equal(t, before, remaining(t, db.Pool), "a dry run deletes nothing")

	env.Params.DryRun = false
	st, err := j.Run(ctx, env)
	require.NoError(t, err)
	var sum int64
	for table, n := range want {
		assert.Equal(t, n, st.Detail[table], table)
		sum += n
	}
	assert.Equal(t, sum, st.Changed)
	// 4 rows a batch: 13 → 4 batches, 7 → 2, 9 → 3, 5 → 2, 3 → 1, 2 → 1; job_runs lost a day whole.
	assert.EqualValues(t, 13, st.Detail["batches"], "deleted in several bounded batches")
	assert.EqualValues(t, 1, st.Detail["job_runs_days"], "the day of the 11 old runs is dropped")
	assert.EqualValues(t, 1, st.Detail["job_runs_days_active"], "the day with a queued run is kept")
	var day *string
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT to_regclass($1)::text`,
		"job_runs_p"+runNow.AddDate(0, 0, -40).Format("20060102")).Scan(&day))
	assert.Nil(t, day, "the day's partition is dropped")

	after := remaining(t, db.Pool)
	for table := range want {
		assert.Zero(t, after[table+" old"], "expired %s left", table)
		assert.Equal(t, before[table+" keep"], after[table+" keep"], "%s inside the window deleted", table)
	}
	var ownRun, unlinked int
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT count(*) FROM job_runs WHERE id = $1`, env.RunID).Scan(&ownRun))
	assert.Equal(t, 1, ownRun, "the running run itself is kept")
	require.NoError(t, db.Pool.QueryRow(ctx,
		`SELECT count(*) FROM message_deliveries WHERE template = 'keep' AND lead_id IS NULL`).Scan(&unlinked))
	assert.Equal(t, 3, unlinked, "a kept delivery of a purged lead is unlinked, not deleted")

	again, err := j.Run(ctx, env)
	require.NoError(t, err)
	assert.Zero(t, again.Changed, "a second run finds nothing left to delete")
}

func TestDataRetentionStopsWhenCancelled(t *testing.T) {
	t.Parallel()
	db, _ := testdb.Open(t, store.Options{})
	seedRetention(t, db.Pool)
	ctx, cancel := context.WithCancel(context.Background())
	env := newEnv(t, db, "data-retention")
	// A pause far longer than the test: the run can only end early through the cancellation,
	// which comes once the first batch has committed.
	j := jobs.NewDataRetention(jobs.RetentionSettings{BatchSize: 4, Pause: time.Hour}, runDays(db, nil))
	go func() {
		assert.Eventually(t, func() bool {
			var n int
			_ = db.Pool.QueryRow(context.Background(), `SELECT count(*) FROM idempotency_keys WHERE scope = 'old'`).Scan(&n)
			return n == 9
		}, 10*time.Second, 5*time.Millisecond)
		cancel()
	}()
	st, err := j.Run(ctx, env)
	require.ErrorIs(t, err, context.Canceled)
	var left int
	require.NoError(t, db.Pool.QueryRow(context.Background(), `SELECT count(*) FROM idempotency_keys WHERE scope = 'old'`).Scan(&left))
	assert.Equal(t, 9, left, "one batch done before the cancellation, none after")
	// The cancellation may cut the answer to the batch's commit, which then goes uncounted.
	assert.LessOrEqual(t, st.Detail["idempotency_keys"], int64(4), "the run counts no more than it deleted")
	assert.EqualValues(t, 11, st.Detail["job_runs"], "job_runs' old day went first, whole")
}

// Catch-up decides from the slots recorded in job_runs: were the newest slot row of a job
// purged, a new leader would find its latest slot unrecorded and run it again. So retention
// keeps every day inside the longest catch-up window, and moves each job's newest run and
// newest slot to job_runs_kept before it drops a day, however old they are.
func TestDataRetentionKeepsTheRunsCatchUpAndTheJobListNeed(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, _ := testdb.Open(t, store.Options{})
	// (job, age in days, slot or manual run, kept): every run finished on its day.
	rows := []struct {
		job    string
		age    int
		manual bool
		kept   bool
	}{
		{"yearly", 765, false, false},
		{"yearly", 400, false, true}, // its newest slot, a year old: catch-up decides from it
		{"yearly", 380, true, true},  // its newest run: the job list shows it
		{"windowed", 90, false, false},
		{"windowed", 50, false, true}, {"windowed", 40, false, true}, // inside the 60-day window
		{"plain", 80, false, false}, {"plain", 70, false, false},
		{"plain", 35, false, true}, {"plain", 31, false, true}, // inside the 60-day window too
	}
	ids := map[int64]bool{}
	for _, r := range rows {
		at := runNow.AddDate(0, 0, -r.age)
		o := storetest.RunOpts{Job: r.job, Trigger: store.TriggerManual, Status: store.StatusSucceeded, CreatedAt: at,
			StartedAt: at, FinishedAt: at.Add(time.Minute), Reason: fmt.Sprint(r.kept)}
		if !r.manual {
			o.Trigger, o.ScheduledAt = store.TriggerSchedule, at
		}
		ids[storetest.Run(ctx, t, db.Pool, o).ID] = r.kept
	}
	env := newEnv(t, db, "data-retention")
	windowed := runDays(db, map[string]time.Duration{"windowed": 60 * day})
	st, err := jobs.NewDataRetention(jobs.RetentionSettings{BatchSize: 2}, windowed).Run(ctx, env)
	require.NoError(t, err)
	assert.EqualValues(t, 6, st.Detail["job_runs_days"], "the days 765, 400, 380, 90, 80 and 70 days ago")
	assert.EqualValues(t, 2, st.Detail["job_runs_kept"])

	left := map[string]int{}
	r, err := db.Pool.Query(ctx, `SELECT job || ' ' || reason FROM job_runs WHERE job <> 'data-retention'`)
	require.NoError(t, err)
	names, err := pgx.CollectRows(r, pgx.RowTo[string])
	require.NoError(t, err)
	for _, n := range names {
		left[n]++
	}
	assert.Equal(t, map[string]int{"yearly true": 2, "windowed true": 2, "plain true": 2}, left)
	for id, kept := range ids {
		run, err := db.Run(ctx, id)
		if kept {
			assert.NoError(t, err, "run %d is found by its id", id)
			assert.Equal(t, id, run.ID)
		} else {
			assert.ErrorIs(t, err, store.ErrRunNotFound, "run %d", id)
		}
	}

	// A second pass, once the job has a newer run and slot, prunes the kept ones.
	storetest.Run(ctx, t, db.Pool, storetest.RunOpts{Job: "yearly", Status: store.StatusSucceeded,
		ScheduledAt: runNow.AddDate(0, 0, -20), FinishedAt: runNow.AddDate(0, 0, -20)})
	st, err = jobs.NewDataRetention(jobs.RetentionSettings{}, windowed).Run(ctx, env)
	require.NoError(t, err)
	assert.EqualValues(t, 2, st.Detail["job_runs_kept_pruned"])
}

// A drop interrupted after its DETACH (a leader killed between the steps) leaves a detached
// table; the next run finishes it.
func TestDataRetentionFinishesAnInterruptedDrop(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, _ := testdb.Open(t, store.Options{})
	at := runNow.AddDate(0, 0, -40)
	for range 3 {
		storetest.Run(ctx, t, db.Pool, storetest.RunOpts{Job: "j", Status: store.StatusSucceeded, CreatedAt: at, FinishedAt: at})
	}
	day := "job_runs_p" + at.Format("20060102")
	_, err := db.Pool.Exec(ctx, `ALTER TABLE job_runs_days DETACH PARTITION `+day)
	require.NoError(t, err)

	st, err := jobs.NewDataRetention(jobs.RetentionSettings{}, runDays(db, nil)).Run(ctx, newEnv(t, db, "data-retention"))
	require.NoError(t, err)
	assert.EqualValues(t, 1, st.Detail["job_runs_days"])
	for _, table := range []string{day, "run_attempts_p" + at.Format("20060102")} {
		var left *string
		require.NoError(t, db.Pool.QueryRow(ctx, `SELECT to_regclass($1)::text`, table).Scan(&left))
		assert.Nil(t, left, "%s is dropped", table)
	}
}
