package engine

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schedulerhq/scheduler/internal/config"
	"github.com/schedulerhq/scheduler/internal/store"
	"github.com/schedulerhq/scheduler/internal/store/storetest"
)

// Issue 29: a failover with asynchronous replication loses the rows of slots whose calls were
// made, and the election of the term that made them. The leader row goes back behind the term
// this replica saw; its next term finds the failover and catches up every unrecorded slot of
// the window under its own key instead of recording it missed, with an audit row.
func TestFailoverRepairsTheLostSlotsInsteadOfRecordingThemMissed(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, url := newDB(t)
	tickSucceededForTenMinutes(ctx, t, db.Pool)
	a := startNode(t, url, "a", nodeOptions{jobs: []config.Job{jobConfig(t, "tick", "@every 1m", time.Minute)}})
	first := awaitTerm(t, a)
	require.Empty(t, first.FailedOver)
	awaitSignal(t, &a.en.testSignals.leading, "the first term")

	// The failover: the rows of the last four slots and the election are gone.
	var lost []time.Time
	rows, err := db.Pool.Query(ctx, `
		DELETE FROM job_runs WHERE job = 'tick' AND scheduled_at >= date_trunc('minute', now()) - interval '3 minutes'
		RETURNING scheduled_at`)
	require.NoError(t, err)
	for rows.Next() {
		var s time.Time
		require.NoError(t, rows.Scan(&s))
		lost = append(lost, s)
	}
	require.NoError(t, rows.Err())
	require.GreaterOrEqual(t, len(lost), 4)
	_, err = db.Pool.Exec(ctx, `UPDATE scheduler_leader SET epoch = 0, instance_id = NULL, term_id = NULL, since = NULL`)
	require.NoError(t, err)

	second := awaitTerm(t, a)
	assert.Equal(t, first.Epoch, second.Epoch, "the rollback names the epoch again")
	assert.NotEqual(t, first.TermID, second.TermID)
	assert.Contains(t, second.FailedOver, "went back")
	assert.GreaterOrEqual(t, awaitSignal(t, &a.en.testSignals.repaired, "the repair"), len(lost))

	require.Eventually(t, func() bool {
		return count(t, db, `SELECT count(*) FROM job_runs WHERE job = 'tick' AND scheduled_at = ANY($1)
			AND trigger = 'catch-up' AND status = 'succeeded'`, lost) == len(lost)
	}, waitTimeout, 10*time.Millisecond, "every lost slot is caught up under its own key")
	assert.Zero(t, count(t, db, `SELECT count(*) FROM job_runs WHERE status = 'missed'`), "no slot is recorded missed")
	assert.Zero(t, count(t, db, `SELECT count(*) FROM (SELECT scheduled_at FROM job_runs WHERE job = 'tick'
		GROUP BY scheduled_at HAVING count(*) > 1) AS twice`), "no slot has two rows")
	var reason string
	var detail map[string]any
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT reason, detail FROM operator_actions WHERE action = $1`,
		store.ActionFailover).Scan(&reason, &detail))
	assert.Contains(t, reason, "failed over")
	assert.Contains(t, detail, "window_from")
	assert.Equal(t, second.TermID.String(), detail["term_id"])
}

// Issue 43: after an asynchronous failover the new primary can hold runs of a lost term still
// running: their claims reached it, their ends did not. Such a run counted against the job's
// bound of active runs, so the slots the repair claimed behind it waited for a run nobody
// runs (or were recorded skipped as overlaps), though their calls had been made. The term
// that finds the failover ends every run an earlier term left running before it repairs the
// window, whatever its epoch's number, trying again when the first statements after the
// failover fail (the rescue's, the catch-up's, which finds the window): each such slot is
// done again by its recovery run, and every other slot of the window by the repair, each
// under its own key, none recorded skipped or missed.
func TestFailoverEndsTheLostTermsRunsBeforeTheRepair(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		// lostEpoch is the epoch of the lost term's runs, from the first term's; back is
		// where the failover leaves the leader row, behind the first term.
		lostEpoch, back func(first int64) int64
		// fail is a statement the new term's first attempt fails (faultTracer), or "".
		fail string
	}{
		// A rollback that keeps the timeline names the lost term's number again, or one
		// below it: its runs carry an epoch above the new term's.
		{name: "a lost term numbered above the new one",
			lostEpoch: func(first int64) int64 { return first }, back: func(int64) int64 { return 0 }},
		// A promoted standby names a number above every lost one, but the first statements
		// after a failover can fail (the pool's connections died with the old primary).
		{name: "the first rescue fails", fail: faultAbandon,
			lostEpoch: func(first int64) int64 { return first - 5 }, back: func(first int64) int64 { return first - 5 }},
		{name: "the first catch-up fails", fail: faultCatchUp,
			lostEpoch: func(first int64) int64 { return first - 5 }, back: func(first int64) int64 { return first - 5 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			db, url := newDB(t)
			tickSucceededForTenMinutes(ctx, t, db.Pool)
			// Epochs with room below the first term's, for a lost term older than the new one.
			_, err := db.Pool.Exec(ctx, `UPDATE scheduler_leader SET epoch = 100`)
			require.NoError(t, err)
			faults := newFaultTracer()
			a := startNode(t, url, "a", nodeOptions{jobs: []config.Job{jobConfig(t, "tick", "@every 1m", time.Minute)},
				tracer: faults, rescueInterval: time.Hour})
			first := awaitTerm(t, a)
			awaitSignal(t, &a.en.testSignals.leading, "the first term")

			// The failover: the last four slots' rows are gone but the oldest one's claim,
			// which a lost term made and whose end was lost: it is still running.
			lost := loseTicks(ctx, t, db.Pool, a.en, tc.lostEpoch(first.Epoch))
			if tc.fail != "" {
				faults.fail(tc.fail, 1)
			}
			_, err = db.Pool.Exec(ctx, `UPDATE scheduler_leader SET epoch = $1, instance_id = NULL, term_id = NULL, since = NULL`,
				tc.back(first.Epoch))
			require.NoError(t, err)

			second := awaitTerm(t, a)
			require.NotEmpty(t, second.FailedOver)
			if tc.fail != "" {
				select {
				case hit := <-faults.hit:
					assert.Equal(t, tc.fail, hit)
				case <-time.After(waitTimeout):
					t.Fatal("the new term never ran the statement that fails")
				}
			}
			// Every lost slot ends succeeded: the running one abandoned and redone by its
			// recovery, the others caught up by the repair.
			done := assert.Eventually(t, func() bool {
				return count(t, db, `SELECT count(*) FROM job_runs r WHERE job = 'tick' AND scheduled_at = ANY($1)
					AND (status = 'succeeded' AND trigger = 'catch-up' OR status = 'abandoned' AND EXISTS (
						SELECT 1 FROM job_runs q WHERE q.recovers_run_id = r.id AND q.status = 'succeeded'))`, lost) == len(lost)
			}, waitTimeout, 10*time.Millisecond, "every slot of the window is done again under its own key")
			if !done {
				rows, err := db.Pool.Query(ctx, `SELECT id, scheduled_at, status, trigger, epoch, reason, recovers_run_id
					FROM job_runs WHERE job = 'tick' ORDER BY id`)
				require.NoError(t, err)
				for rows.Next() {
					v, _ := rows.Values()
					t.Logf("run %v", v)
				}
				t.FailNow()
			}
			assert.Zero(t, count(t, db, `SELECT count(*) FROM job_runs WHERE status IN ('skipped', 'missed')
				AND scheduled_at <= $1`, second.Since), "no slot of the window is recorded skipped or missed")
			// Each lost slot is called once on the new history: a recovery run does its
			// abandoned run's slot.
			assert.Equal(t, len(lost), count(t, db, `SELECT count(DISTINCT coalesce(r.scheduled_at, a.scheduled_at))
				FROM test_calls c JOIN job_runs r ON r.id = c.run_id LEFT JOIN job_runs a ON a.id = r.recovers_run_id
				WHERE coalesce(r.scheduled_at, a.scheduled_at) = ANY($1)`, lost))
			assert.Equal(t, len(lost), count(t, db, `SELECT count(*) FROM test_calls c JOIN job_runs r ON r.id = c.run_id
				LEFT JOIN job_runs a ON a.id = r.recovers_run_id WHERE coalesce(r.scheduled_at, a.scheduled_at) = ANY($1)`, lost),
				"each slot is called once")
		})
	}
}

// loseTicks deletes tick's rows of the last four minutes and writes the oldest one back as
// running under lostEpoch, as a failover that lost those commits leaves them, and returns the
// slots it deleted. It waits for a moment when tick has no active run of en's term (one
// claimed ahead for the next minute would hold the job's bound), awaiting en's run ends,
// and looks under the active runs' lock so that no claim comes between the look and the
// writes.
func loseTicks(ctx context.Context, t *testing.T, pool *pgxpool.Pool, en *Engine, lostEpoch int64) []time.Time {
	t.Helper()
	deadline := time.Now().Add(waitTimeout)
	for {
		tx, err := pool.Begin(ctx)
		require.NoError(t, err)
		_, err = tx.Exec(ctx, `SELECT 1 FROM scheduler_locks WHERE name = 'scheduler:active_runs' FOR UPDATE`)
		require.NoError(t, err)
		var busy bool
		require.NoError(t, tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM job_runs WHERE job = 'tick' AND status IN ('queued', 'running'))`).Scan(&busy))
		if busy {
			require.NoError(t, tx.Rollback(ctx))
			require.True(t, time.Now().Before(deadline), "tick never went without an active run")
			// Only the end of a run makes tick idle, and en records it before it signals it;
			// a claim that came first makes it busy again, and the next end is awaited.
			awaitSignal(t, &en.testSignals.finished, "the end of tick's active run")
			continue
		}
		rows, err := tx.Query(ctx, `
			WITH gone AS (DELETE FROM job_runs WHERE job = 'tick' AND scheduled_at >= date_trunc('minute', now()) - interval '3 minutes'
			              RETURNING scheduled_at)
			SELECT scheduled_at FROM gone ORDER BY 1`)
		require.NoError(t, err)
		lost, err := pgx.CollectRows(rows, pgx.RowTo[time.Time])
		require.NoError(t, err)
		require.GreaterOrEqual(t, len(lost), 4)
		storetest.Run(ctx, t, tx, storetest.RunOpts{Job: "tick", Status: store.StatusRunning, ScheduledAt: lost[0],
			StartedAt: lost[0], InstanceID: "lost", Epoch: storetest.Ptr(lostEpoch)})
		require.NoError(t, tx.Commit(ctx))
		return lost
	}
}

// tickSucceededForTenMinutes records every slot of job tick in the last ten minutes
// succeeded, so that a first term has nothing to catch up.
func tickSucceededForTenMinutes(ctx context.Context, t *testing.T, db storetest.DBTX) {
	t.Helper()
	now := time.Now()
	var done []storetest.RunOpts
	for m := 10; m >= 0; m-- {
		done = append(done, storetest.RunOpts{Job: "tick", Status: store.StatusSucceeded,
			ScheduledAt: now.Truncate(time.Minute).Add(time.Duration(-m) * time.Minute), StartedAt: now, FinishedAt: now})
	}
	storetest.Runs(ctx, t, db, done...)
}
