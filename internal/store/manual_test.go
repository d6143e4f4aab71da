package store_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schedulerhq/scheduler/internal/store"
	"github.com/schedulerhq/scheduler/internal/testdb"
)

// Three replicas trigger a fast job at once while its run finishes: each trigger must answer
// either the run that was active or a new run, never an error (issue 28: the insert saw the
// active run, the next statement did not, because the run had finished in between, and the
// API answered 503).
func TestConcurrentTriggersMeetARunFinishing(t *testing.T) {
	t.Parallel()
	db, _ := testdb.Open(t, store.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const job, triggers, rounds = "appointment-confirmations", 3, 150

	for round := range rounds {
		active, created, err := db.QueueManualRun(ctx, job, nil, []byte(`{}`))
		require.NoError(t, err)
		require.True(t, created, "round %d: the job had no active run", round)

		start := make(chan struct{})
		var wg sync.WaitGroup
		type answer struct {
			run     *store.Run
			created bool
			err     error
		}
		answers := make([]answer, triggers)
		for i := range triggers {
			wg.Go(func() {
				<-start
				run, created, err := db.QueueManualRun(ctx, job, nil, []byte(`{}`))
				answers[i] = answer{run, created, err}
			})
		}
		wg.Go(func() {
			<-start
			// The run ends as the leader's finish would end it.
			_, err := db.Pool.Exec(ctx, `UPDATE job_runs SET status = 'succeeded', started_at = now(), finished_at = now() WHERE id = $1`, active.ID)
			assert.NoError(t, err)
		})
		close(start)
		wg.Wait()

		var fresh int64
		for i, a := range answers {
			require.NoError(t, a.err, "round %d, trigger %d: a trigger that meets a run finishing must not fail", round, i)
			if a.created {
				assert.Zero(t, fresh, "round %d: two triggers created a run", round)
				fresh = a.run.ID
			}
		}
		for i, a := range answers {
			if a.run.ID != active.ID && a.run.ID != fresh {
				t.Errorf("round %d, trigger %d: answered run %d, neither the active run %d nor the new one %d", round, i, a.run.ID, active.ID, fresh)
			}
		}
		var actives int
		require.NoError(t, db.Pool.QueryRow(ctx,
			`SELECT count(*) FROM job_runs WHERE job = $1 AND status IN ('queued', 'running')`, job).Scan(&actives))
		require.LessOrEqual(t, actives, 1, "round %d: more than one active run", round)
		_, err = db.Pool.Exec(ctx, `UPDATE job_runs SET status = 'cancelled', finished_at = now() WHERE job = $1 AND status = 'queued'`, job)
		require.NoError(t, err)
	}
}
