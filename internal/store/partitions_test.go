package store_test

import (
	"context"
	"io/fs"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schedulerhq/scheduler/internal/store"
	"github.com/schedulerhq/scheduler/internal/store/storetest"
	"github.com/schedulerhq/scheduler/internal/testdb"
	"github.com/schedulerhq/scheduler/migrations"
)

// A partition of job_runs holds one day, so its unique index on the job's active run cannot
// see another day's: a catch-up claim of yesterday's slot and a manual run queued today
// would both pass it. The writers of active runs lock one row of scheduler_locks, under
// which the manual run waits for the claim and then finds its run.
func TestOneActiveRunPerJobAcrossDays(t *testing.T) {
	t.Parallel()
	db, _ := testdb.Open(t, store.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := db.Pool.Exec(ctx, `UPDATE scheduler_leader SET epoch = 1`)
	require.NoError(t, err)
	var yesterday time.Time
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT date_trunc('second', now() - interval '1 day')`).Scan(&yesterday))

	claimed := make(chan int64, 1)
	commit := make(chan struct{})
	claimErr := make(chan error, 1)
	go func() {
		claimErr <- db.Fenced(ctx, store.Fence{Epoch: 1}, func(tx *store.Tx) error {
			out, err := tx.ClaimSlot(ctx, store.Claim{Job: "nightly", ScheduledAt: yesterday,
				Trigger: store.TriggerCatchUp, InstanceID: "a"})
			if err != nil {
				return err
			}
			claimed <- out.Run.ID
			<-commit
			return nil
		})
	}()
	var claimID int64
	select {
	case claimID = <-claimed:
	case err := <-claimErr:
		t.Fatalf("claim: %v", err)
	case <-ctx.Done():
		t.Fatal("the claim did not happen")
	}

	type queued struct {
		run     *store.Run
		created bool
		err     error
	}
	manual := make(chan queued, 1)
	go func() {
		run, created, err := db.QueueManualRun(ctx, "nightly", nil, []byte(`{}`))
		manual <- queued{run, created, err}
	}()
	// The manual run waits on the lock the claim holds.
	deadline := time.After(10 * time.Second)
	for waiting := false; !waiting; {
		select {
		case q := <-manual:
			close(commit)
			t.Fatalf("the manual trigger answered (created=%t, err=%v) before the claim committed: it did not wait",
				q.created, q.err)
		case <-deadline:
			close(commit)
			t.Fatal("the manual trigger never waited on the lock")
		case <-time.After(5 * time.Millisecond):
		}
		require.NoError(t, db.Pool.QueryRow(ctx,
			`SELECT EXISTS (SELECT 1 FROM pg_locks WHERE locktype = 'transactionid' AND NOT granted)`).Scan(&waiting))
	}
	close(commit)
	require.NoError(t, <-claimErr)

	q := <-manual
	require.NoError(t, q.err)
	assert.False(t, q.created, "no second active run of the job")
	assert.Equal(t, claimID, q.run.ID, "the manual trigger answers with the claimed run")
	var active int
	require.NoError(t, db.Pool.QueryRow(ctx,
		`SELECT count(*) FROM job_runs WHERE job = 'nightly' AND status IN ('queued', 'running')`).Scan(&active))
	assert.Equal(t, 1, active)
}

// A run's id carries its day: reading a run by id touches its day's partition and
// job_runs_kept, however many days there are.
func TestRunByIDReadsOnePartition(t *testing.T) {
	t.Parallel()
	db, _ := testdb.Open(t, store.Options{})
	ctx := context.Background()
	testdb.AddRunDays(t, db.Pool, time.Now().AddDate(0, 0, -40), time.Now())
	id := storetest.Run(ctx, t, db.Pool, storetest.RunOpts{Job: "j", Status: store.StatusSkipped,
		ScheduledAt: time.Now().Add(-20 * 24 * time.Hour).Truncate(time.Second)}).ID
	run, err := db.Run(ctx, id)
	require.NoError(t, err)
	assert.Equal(t, "j", run.Job)

	rows, err := db.Pool.Query(ctx, `EXPLAIN SELECT * FROM job_runs WHERE id = $1`, id)
	require.NoError(t, err)
	var lines []string
	for rows.Next() {
		var line string
		require.NoError(t, rows.Scan(&line))
		lines = append(lines, line)
	}
	require.NoError(t, rows.Err())
	text := strings.Join(lines, "\n")
	day := "job_runs_p" + time.Now().UTC().AddDate(0, 0, -20).Format("20060102")
	assert.Contains(t, text, day)
	assert.Equal(t, 2, strings.Count(text, " on job_runs_"), "one day's partition and job_runs_kept:\n%s", text)
}

// Reads of a job's newest runs (a history page, the job list's last run, a new leader's last
// successes) look at the two newest days first and at the older ones only for what those
// lack: the answers are those of one read over every day, and the first read plans and
// probes a handful of partitions rather than every day kept.
func TestNewestRunsReadTheNewestDaysFirst(t *testing.T) {
	t.Parallel()
	db, _ := testdb.Open(t, store.Options{})
	ctx := context.Background()
	testdb.AddRunDays(t, db.Pool, time.Now().AddDate(0, 0, -40), time.Now())
	// "busy" ran three times today and five times 20 days ago; "quiet" only 20 and 30 days
	// ago; "never" did not run. Every other run succeeded.
	minute := time.Now().Truncate(time.Minute)
	var runs []storetest.RunOpts
	for _, r := range []struct {
		job        string
		daysAgo, i int
	}{{"busy", 0, 1}, {"busy", 0, 2}, {"busy", 0, 3},
		{"busy", 20, 1}, {"busy", 20, 2}, {"busy", 20, 3}, {"busy", 20, 4}, {"busy", 20, 5},
		{"quiet", 30, 1}, {"quiet", 20, 2}, {"quiet", 20, 3}} {
		ts := minute.Add(time.Duration(-r.daysAgo)*24*time.Hour - time.Duration(10-r.i)*time.Minute)
		status := store.StatusFailed
		if r.i%2 == 0 {
			status = store.StatusSucceeded
		}
		runs = append(runs, storetest.RunOpts{Job: r.job, Status: status, ScheduledAt: ts, CreatedAt: ts, FinishedAt: ts.Add(time.Second)})
	}
	storetest.Runs(ctx, t, db.Pool, runs...)
	everyDay := func(job string, before int64, limit int) []int64 {
		rows, err := db.Pool.Query(ctx, `SELECT id FROM job_runs WHERE job = $1 AND ($2::bigint = 0 OR id < $2)
			ORDER BY id DESC LIMIT $3`, job, before, limit)
		require.NoError(t, err)
		ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
		require.NoError(t, err)
		return ids
	}
	pageIDs := func(f store.RunFilter) []int64 {
		runs, err := db.ListRuns(ctx, f)
		require.NoError(t, err)
		ids := make([]int64, len(runs))
		for i, r := range runs {
			ids[i] = r.ID
		}
		return ids
	}

	first := pageIDs(store.RunFilter{Job: "busy", Limit: 5})
	assert.Equal(t, everyDay("busy", 0, 5), first, "a first page that spans today and 20 days ago")
	assert.Equal(t, everyDay("busy", 0, 2), pageIDs(store.RunFilter{Job: "busy", Limit: 2}))
	assert.Equal(t, everyDay("busy", first[4], 5), pageIDs(store.RunFilter{Job: "busy", BeforeID: first[4], Limit: 5}),
		"a deep page from 20 days ago")
	assert.Equal(t, everyDay("quiet", 0, 5), pageIDs(store.RunFilter{Job: "quiet", Limit: 5}))

	_, _, last, err := db.JobStates(ctx, []string{"busy", "quiet", "never"})
	require.NoError(t, err)
	require.Contains(t, last, "busy")
	require.Contains(t, last, "quiet")
	assert.Equal(t, everyDay("busy", 0, 1)[0], last["busy"].ID)
	assert.Equal(t, everyDay("quiet", 0, 1)[0], last["quiet"].ID)
	assert.NotContains(t, last, "never")

	histories, err := db.JobHistories(ctx, []string{"busy", "quiet", "never"})
	require.NoError(t, err)
	success := map[string]time.Time{}
	for _, h := range histories {
		success[h.Job] = h.LastSuccess
	}
	for _, job := range []string{"busy", "quiet", "never"} {
		var at *time.Time
		require.NoError(t, db.Pool.QueryRow(ctx, `SELECT max(finished_at) FROM job_runs
			WHERE job = $1 AND status = 'succeeded'`, job).Scan(&at), job)
		var want time.Time
		if at != nil {
			want = *at
		}
		assert.True(t, want.Equal(success[job]), "%s: last success %v, want %v", job, success[job], want)
	}

	sql, args := store.RecentRunsSQL(store.RunFilter{Job: "busy", Limit: 5}, time.Now())
	rows, err := db.Pool.Query(ctx, `EXPLAIN `+sql, args...)
	require.NoError(t, err)
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	plan := strings.Join(lines, "\n")
	assert.LessOrEqual(t, strings.Count(plan, " on job_runs_"), store.DaysAhead+3,
		"yesterday, today, the days ahead and job_runs_kept, not 40 days:\n%s", plan)
}

// A bulk claim looks for a slot's row in the slot's day only (and job_runs_kept), so the row
// must be found wherever it went: moved to job_runs_kept by retention, with a day's id or an
// id from before migration 13, or left in the legacy partition by the upgrade.
func TestClaimSlotsFindsSlotsKeptOrFromBeforePartitioning(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	claimTwice := func(t *testing.T, db *store.DB, pool *pgxpool.Pool, claims ...store.Claim) {
		t.Helper()
		_, err := pool.Exec(ctx, `UPDATE scheduler_leader SET epoch = 1`)
		require.NoError(t, err)
		var rows, after int
		require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM job_runs`).Scan(&rows))
		var out []store.ClaimOutcome
		require.NoError(t, db.Fenced(ctx, store.Fence{Epoch: 1}, func(tx *store.Tx) error {
			out, err = tx.ClaimSlots(ctx, claims)
			return err
		}))
		for i, c := range claims {
			assert.Nil(t, out[i].Run, "%s: its slot has a row already", c.Job)
			assert.True(t, out[i].Taken, "%s: %+v", c.Job, out[i])
		}
		require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM job_runs`).Scan(&after))
		assert.Equal(t, rows, after)
	}
	// keep inserts a slot of two days ago and moves it to job_runs_kept, as retention does.
	keep := func(t *testing.T, pool *pgxpool.Pool, job string) store.Claim {
		var slot time.Time
		require.NoError(t, pool.QueryRow(ctx, `SELECT date_trunc('minute', now()) - interval '2 days'`).Scan(&slot))
		storetest.Run(ctx, t, pool, storetest.RunOpts{Job: job, Status: store.StatusSucceeded, ScheduledAt: slot})
		_, err := pool.Exec(ctx, `UPDATE job_runs SET kept = true WHERE job = $1`, job)
		require.NoError(t, err)
		var kept bool
		require.NoError(t, pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM job_runs_kept WHERE job = $1)`, job).Scan(&kept))
		require.True(t, kept)
		return store.Claim{Job: job, ScheduledAt: slot, Trigger: store.TriggerCatchUp, InstanceID: "a"}
	}

	t.Run("day ids", func(t *testing.T) {
		t.Parallel()
		db, _ := testdb.Open(t, store.Options{})
		testdb.AddRunDays(t, db.Pool, time.Now().AddDate(0, 0, -3), time.Now())
		claimTwice(t, db.DB, db.Pool, keep(t, db.Pool, "kept"))
	})

	t.Run("upgraded", func(t *testing.T) {
		t.Parallel()
		u := testdb.Empty(t)
		mg, err := store.NewMigrator(u)
		require.NoError(t, err)
		defer mg.Close()
		require.NoError(t, mg.Up())
		require.NoError(t, mg.Down(migrationsAfter(t, 12))) // job_runs before partitioning
		pool, err := pgxpool.New(ctx, u)
		require.NoError(t, err)
		defer pool.Close()
		var slot time.Time
		require.NoError(t, pool.QueryRow(ctx, `SELECT date_trunc('minute', now()) - interval '1 minute'`).Scan(&slot))
		_, err = pool.Exec(ctx, `INSERT INTO job_runs (job, trigger, status, scheduled_at) VALUES ('old', 'schedule', 'succeeded', $1)`, slot)
		require.NoError(t, err)
		require.NoError(t, mg.Up())
		var legacy bool
		require.NoError(t, pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM job_runs_legacy WHERE job = 'old')`).Scan(&legacy))
		require.True(t, legacy)
		_, err = pool.Exec(ctx, `SELECT scheduler_add_run_day((now() AT TIME ZONE 'UTC')::date + n) FROM generate_series(-2, 3) AS n`)
		require.NoError(t, err)
		db, err := store.Open(ctx, u, store.Options{InstanceID: "a", LeaseTimeout: 5 * time.Second})
		require.NoError(t, err)
		defer db.Close()
		// Before the cutover (the next UTC day), slots get plain ids, kept ones too.
		claimTwice(t, db, pool, store.Claim{Job: "old", ScheduledAt: slot, Trigger: store.TriggerCatchUp, InstanceID: "a"},
			keep(t, pool, "kept"))
	})
}

// The bulk claim reads the active runs with an index scan, which marks the entries of
// finished runs dead for the next claim, not with a bitmap scan, which would visit every
// run finished since the last vacuum again at each claim.
func TestClaimReadsActiveRunsWithoutBitmapScan(t *testing.T) {
	t.Parallel()
	db, _ := testdb.Open(t, store.Options{})
	ctx := context.Background()
	// A history of finished runs, analysed, as a live database has: on empty tables the
	// planner's guess of their size depends on the row's width, not on anything the claim does.
	now := time.Now().UTC().Truncate(time.Second)
	var history []storetest.RunOpts
	for i := range 2000 {
		slot := now.Add(-time.Duration(i+1) * time.Second)
		history = append(history, storetest.RunOpts{Job: "j", Status: "succeeded", ScheduledAt: slot, StartedAt: slot, FinishedAt: slot})
	}
	storetest.Runs(ctx, t, db.Pool, history...)
	_, err := db.Pool.Exec(ctx, `ANALYZE job_runs`)
	require.NoError(t, err)
	tx, err := db.Pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	_, err = tx.Exec(ctx, store.ClaimSettings)
	require.NoError(t, err)
	rows, err := tx.Query(ctx, `EXPLAIN `+store.ClaimSQL([]int64{0}, []int64{0}, false),
		[]string{"j"}, []string{"schedule"}, []time.Time{time.Now().Truncate(time.Minute)}, []*int64{nil}, []int64{0}, []int64{0}, "a", int64(1), []int64{0}, nil, 0)
	require.NoError(t, err)
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	plan := strings.Join(lines, "\n")
	assert.Contains(t, plan, "_active_idx")
	assert.NotContains(t, plan, "Bitmap", "the claim reads the active runs with a bitmap scan")
}

// migrationsAfter counts the migrations above version, the steps Down takes back to it.
func migrationsAfter(t *testing.T, version uint64) int {
	entries, err := fs.Glob(migrations.FS, "*.up.sql")
	require.NoError(t, err)
	n := 0
	for _, e := range entries {
		v, err := strconv.ParseUint(e[:strings.Index(e, "_")], 10, 32)
		require.NoError(t, err)
		if v > version {
			n++
		}
	}
	return n
}
