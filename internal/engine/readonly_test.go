package engine

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/schedulerhq/scheduler/internal/config"
	"github.com/schedulerhq/scheduler/internal/jobcontract"
	"github.com/schedulerhq/scheduler/internal/store"
)

// unfencedJob writes through the job's read handle instead of env.Tx, as a careless job
// body would.
type unfencedJob struct{ name string }

func (j unfencedJob) Name() string { return j.name }
func (j unfencedJob) Defaults() jobcontract.Defaults {
	return jobcontract.Defaults{Schedule: "@every 1s", Timeout: time.Minute}
}
func (j unfencedJob) Run(ctx context.Context, env *jobcontract.Env) (jobcontract.Stats, error) {
	var n int
	err := env.ReadOnly.QueryRow(ctx, `
		WITH w AS (INSERT INTO test_calls (run_id, epoch, written_at) VALUES ($1, 0, clock_timestamp()) RETURNING 1)
		SELECT count(*) FROM w`, env.RunID).Scan(&n)
	return jobcontract.Stats{}, err
}

// Guarantee 1: a job body's only write path is the fenced transaction; a write through its
// read handle fails on the server and commits nothing.
func TestUnfencedWriteFailsOnTheServer(t *testing.T) {
	t.Parallel()
	db, url := newDB(t)
	n := startNode(t, url, "a", nodeOptions{jobs: []config.Job{manualOnly(t, "unfenced", time.Minute)}})
	awaitSignal(t, &n.en.testSignals.leading, "leading")

	id := queueRun(t, db, "unfenced")
	r := awaitFinished(t, db, id)
	assert.Equal(t, store.StatusFailed, r.Status, "a write outside the fence must fail")
	if assert.NotNil(t, r.Error) {
		assert.Contains(t, *r.Error, "SQLSTATE 25006", "refused by the server as a write in a read-only transaction")
	}
	assert.Zero(t, count(t, db, `SELECT count(*) FROM test_calls WHERE run_id = $1`, id), "nothing committed")
}
