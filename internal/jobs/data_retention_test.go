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
	"github.com/schedulerhq/scheduler/internal/testdb"
)

const day = 24 * time.Hour

// seedRetention fills every purged table with rows to delete (marked 'old') and rows to keep
// (marked 'keep'), relative to runNow and the default windows, and returns how many of each
// table must go.
func seedRetention(t *testing.T, pool *pgxpool.Pool) map[string]int64 {
	t.Helper()
	ctx := context.Background()
	for _, q := range []string{
		// idempotency_keys: 13 expired, 5 still valid; the scope says which.
		`INSERT INTO idempotency_keys (key, scope, request_hash, expires_at)
		 SELECT gen_random_uuid(), 'old', 'h', $1::timestamptz - i * interval '1 hour' FROM generate_series(1, 13) i`,
		`INSERT INTO idempotency_keys (key, scope, request_hash, expires_at)
		 SELECT gen_random_uuid(), 'keep', 'h', $1::timestamptz + i * interval '1 minute' FROM generate_series(1, 5) i`,
		// job_runs: 11 finished more than 30 days ago; kept: 4 finished within 30 days, an old
		// queued and an old running run, and a recent recovery run of an old run.
		`INSERT INTO job_runs (job, trigger, status, created_at, started_at, finished_at, reason)
		 SELECT 'j', 'manual', (ARRAY['succeeded', 'failed', 'skipped', 'cancelled'])[1 + i % 4],
		        $1::timestamptz - interval '40 days', $1::timestamptz - interval '40 days',
		        $1::timestamptz - interval '31 days' - i * interval '1 hour', 'old'
		 FROM generate_series(1, 11) i`,
		`INSERT INTO job_runs (job, trigger, status, created_at, started_at, finished_at, reason)
		 SELECT 'j', 'manual', 'succeeded', $1::timestamptz - interval '29 days', $1::timestamptz - interval '29 days',
		        $1::timestamptz - interval '29 days', 'keep'
		 FROM generate_series(1, 4) i`,
		`INSERT INTO job_runs (job, trigger, status, created_at, reason)
		 VALUES ('q', 'manual', 'queued', $1::timestamptz - interval '60 days', 'keep'),
		        ('r', 'manual', 'running', $1::timestamptz - interval '60 days', 'keep')`,
		`INSERT INTO job_runs (job, trigger, status, created_at, finished_at, recovers_run_id, reason)
		 SELECT 'j', 'recovery', 'succeeded', $1::timestamptz, $1::timestamptz, min(id), 'keep'
		 FROM job_runs WHERE reason = 'old'`,
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
	} {
		var args []any
		if strings.Contains(q, "$1") {
			args = append(args, runNow)
		}
		_, err := pool.Exec(ctx, q, args...)
		require.NoError(t, err, q)
	}
	return map[string]int64{"idempotency_keys": 13, "job_runs": 11, "message_deliveries": 7, "leads": 9, "operator_actions": 5}
}

// remaining counts each table's rows by marker: what is left of the 'old' rows and the 'keep' ones.
func remaining(t *testing.T, pool *pgxpool.Pool) map[string]int64 {
	t.Helper()
	var out = map[string]int64{}
	for table, q := range map[string]string{
		"idempotency_keys":   `SELECT count(*) FILTER (WHERE scope = 'old'), count(*) FILTER (WHERE scope = 'keep') FROM idempotency_keys`,
		"job_runs":           `SELECT count(*) FILTER (WHERE reason = 'old'), count(*) FILTER (WHERE reason = 'keep') FROM job_runs`,
		"message_deliveries": `SELECT count(*) FILTER (WHERE template = 'old'), count(*) FILTER (WHERE template = 'keep') FROM message_deliveries`,
		"leads":              `SELECT count(*) FILTER (WHERE session_id LIKE 'old-%'), count(*) FILTER (WHERE session_id LIKE 'keep-%') FROM leads`,
		"operator_actions":   `SELECT count(*) FILTER (WHERE reason = 'old'), count(*) FILTER (WHERE reason = 'keep') FROM operator_actions`,
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
	job := jobs.NewDataRetention(jobs.RetentionSettings{BatchSize: 4, Pause: time.Millisecond})

	env := newEnv(t, db, "data-retention") // its own run is running, so it is kept
	env.Params.DryRun = true
	dry, err := job.Run(ctx, env)
	require.NoError(t, err)
	for table, n := range want {
		assert.Equal(t, n, dry.Detail[table], "dry run count of %s", table)
	}
	assert.Equal(t, before, remaining(t, db.Pool), "a dry run deletes nothing")

	env.Params.DryRun = false
	st, err := job.Run(ctx, env)
	require.NoError(t, err)
	var sum int64
	for table, n := range want {
		assert.Equal(t, n, st.Detail[table], table)
		sum += n
	}
	assert.Equal(t, sum, st.Changed)
	// 4 rows a batch: 13 → 4 batches, 11 → 3, 7 → 2, 9 → 3, 5 → 2.
	assert.EqualValues(t, 14, st.Detail["batches"], "deleted in several bounded batches")

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

	again, err := job.Run(ctx, env)
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
	job := jobs.NewDataRetention(jobs.RetentionSettings{BatchSize: 4, Pause: time.Hour})
	go func() {
		assert.Eventually(t, func() bool {
			var n int
			_ = db.Pool.QueryRow(context.Background(), `SELECT count(*) FROM idempotency_keys WHERE scope = 'old'`).Scan(&n)
			return n == 9
		}, 10*time.Second, 5*time.Millisecond)
		cancel()
	}()
	st, err := job.Run(ctx, env)
	require.ErrorIs(t, err, context.Canceled)
	assert.EqualValues(t, 4, st.Detail["idempotency_keys"], "one batch done before the cancellation")
	assert.Zero(t, st.Detail["job_runs"])
}

// Catch-up decides from the slots recorded in job_runs: were the newest slot row of a job
// purged, a new leader would find its latest slot unrecorded and run it again. So the purge
// keeps each job's newest slot row however old, and every slot row inside the job's
// catch-up window, and deletes the rest of the expired rows.
func TestDataRetentionKeepsTheSlotRowsCatchUpNeeds(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, _ := testdb.Open(t, store.Options{})
	// (job, slot age in days, kept): every row finished at its slot, long past 30 days.
	rows := []struct {
		job  string
		age  int
		kept bool
	}{
		{"yearly", 400, true}, {"yearly", 765, false}, // its newest row, a year old, stays
		{"windowed", 40, true}, {"windowed", 50, true}, {"windowed", 90, false}, // 60-day window
		{"plain", 31, true}, {"plain", 35, false}, // no window: only its newest row stays
	}
	for _, r := range rows {
		_, err := db.Pool.Exec(ctx, `
INSERT INTO job_runs (job, trigger, status, scheduled_at, created_at, started_at, finished_at, reason)
SELECT $1, 'schedule', 'succeeded', s, s, s, s + interval '1 minute', $2
FROM (SELECT $3::timestamptz - make_interval(days => $4) AS s) AS slot`,
			r.job, fmt.Sprint(r.kept), runNow, r.age)
		require.NoError(t, err)
	}
	env := newEnv(t, db, "data-retention")
	env.CatchUpWindows = map[string]time.Duration{"yearly": 365 * day, "windowed": 60 * day}
	st, err := jobs.NewDataRetention(jobs.RetentionSettings{BatchSize: 2}).Run(ctx, env)
	require.NoError(t, err)
	assert.EqualValues(t, 3, st.Detail["job_runs"])

	left := map[string]int{}
	r, err := db.Pool.Query(ctx, `SELECT job || ' ' || reason FROM job_runs WHERE job <> 'data-retention'`)
	require.NoError(t, err)
	names, err := pgx.CollectRows(r, pgx.RowTo[string])
	require.NoError(t, err)
	for _, n := range names {
		left[n]++
	}
	assert.Equal(t, map[string]int{"yearly true": 1, "windowed true": 2, "plain true": 1}, left)
}
