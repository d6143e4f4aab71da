package engine

import (
	"context"
	"testing"
	"time"

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
	// Every slot of the last ten minutes succeeded, so the first term has nothing to catch up.
	now := time.Now()
	var done []storetest.RunOpts
	for m := 10; m >= 0; m-- {
		done = append(done, storetest.RunOpts{Job: "tick", Status: store.StatusSucceeded,
			ScheduledAt: now.Truncate(time.Minute).Add(time.Duration(-m) * time.Minute), StartedAt: now, FinishedAt: now})
	}
	storetest.Runs(ctx, t, db.Pool, done...)
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
