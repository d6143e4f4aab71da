package store_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schedulerhq/scheduler/internal/store"
	"github.com/schedulerhq/scheduler/internal/testdb"
)

// A partition of job_runs holds one day, so its unique index on the job's active run cannot
// see another day's: a catch-up claim of yesterday's slot and a manual run queued today
// would both pass it. The writers of active runs take one advisory lock, under which the
// manual run waits for the claim and then finds its run.
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
		claimErr <- db.Fenced(ctx, 1, func(tx *store.Tx) error {
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
			`SELECT EXISTS (SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND NOT granted)`).Scan(&waiting))
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
	var id int64
	require.NoError(t, db.Pool.QueryRow(ctx, `
		INSERT INTO job_runs (id, job, trigger, status, scheduled_at)
		VALUES (job_run_id(now() - interval '20 days'), 'j', 'schedule', 'skipped', date_trunc('second', now() - interval '20 days'))
		RETURNING id`).Scan(&id))
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
