package store_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/schedulerhq/scheduler/internal/store"
	"github.com/schedulerhq/scheduler/internal/testdb"
)

// claimMinuteJobs is the figure: 100 000 runtime jobs due on the same minute.
const claimMinuteJobs = 100_000

// claimBatchMax is the engine claimer's largest batch (internal/engine/claimer.go).
const claimBatchMax = 10_000

// BenchmarkClaimMinute100k measures what one PostgreSQL carries of a partitioned cluster's
// busiest instant (docs/design.md, "Scaling"): 100 000 slots of one minute, hashed onto 64
// partitions by scheduler_partition_of, each partition's slots claimed by store.ClaimSlots in
// one transaction fenced by that partition's term, as each partition's engine claims them.
// One op is the whole minute; ns/op is its time. The "1 partition" case is today's single
// leader: batches of claimBatchMax under the coordinator's fence. "3 claimers" runs the
// partitions' transactions from three goroutines at once, as three replicas would. "runs
// ended" ends every batch's runs before the next batch (untimed), so that no claim finds
// another batch's runs active: what the claims cost when each counts only its own
// partition's active runs rather than the whole database's.
//
//	go test -run '^$' -bench BenchmarkClaimMinute100k -benchtime 3x ./internal/store/
func BenchmarkClaimMinute100k(b *testing.B) {
	for _, c := range []struct {
		name       string
		partitions int
		claimers   int
		endEach    bool
	}{
		{"1 partition", 1, 1, false},
		{"64 partitions", 64, 1, false},
		{"64 partitions, 3 claimers", 64, 3, false},
		{"64 partitions, runs ended", 64, 1, true},
	} {
		b.Run(c.name, func(b *testing.B) { benchClaimMinute(b, c.partitions, c.claimers, c.endEach) })
	}
}

func benchClaimMinute(b *testing.B, partitions, claimers int, endEach bool) {
	ctx := context.Background()
	db, _ := testdb.Open(b, store.Options{})
	batches := claimMinuteBatches(ctx, b, db, partitions)
	// Every iteration claims a minute of its own, in the past so that every slot is due.
	base := time.Now().UTC().Truncate(time.Minute).Add(-time.Duration(b.N+1) * time.Minute)
	testdb.AddRunDays(b, db.Pool, base, time.Now())
	b.ResetTimer()
	for i := range b.N {
		slot := base.Add(time.Duration(i) * time.Minute)
		if endEach {
			for _, batch := range batches {
				require.NoError(b, claimMinuteBatch(ctx, db, batch, slot))
				b.StopTimer()
				endClaimedRuns(ctx, b, db)
				b.StartTimer()
			}
			continue
		}
		work := make(chan claimBatch)
		var wg sync.WaitGroup
		errs := make(chan error, claimers)
		for range claimers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for batch := range work {
					if err := claimMinuteBatch(ctx, db, batch, slot); err != nil {
						errs <- err
						for range work { // let the sender finish
						}
						return
					}
				}
			}()
		}
		for _, batch := range batches {
			work <- batch
		}
		close(work)
		wg.Wait()
		close(errs)
		require.NoError(b, <-errs)
		// The runs end between minutes, so every job is idle at the next one, as at the top
		// of an hour whose previous runs have finished.
		b.StopTimer()
		endClaimedRuns(ctx, b, db)
		b.StartTimer()
	}
	b.ReportMetric(float64(claimMinuteJobs*b.N)/b.Elapsed().Seconds(), "claims/s")
}

func endClaimedRuns(ctx context.Context, b *testing.B, db *testdb.DB) {
	b.Helper()
	_, err := db.Pool.Exec(ctx, `UPDATE job_runs SET status = 'succeeded', finished_at = now() WHERE status = 'running'`)
	require.NoError(b, err)
}

// claimBatch is one fenced transaction's claims: jobs of one partition.
type claimBatch struct {
	fence store.Fence
	jobs  []string
}

// claimMinuteBatches makes the cluster of the given partitions, each term at epoch 1, and
// splits claimMinuteJobs job keys by their partition into batches of at most claimBatchMax.
func claimMinuteBatches(ctx context.Context, b *testing.B, db *testdb.DB, partitions int) []claimBatch {
	b.Helper()
	_, err := db.Pool.Exec(ctx, `
		WITH cluster AS (INSERT INTO scheduler_cluster (partitions) VALUES ($1)),
		     coordinator AS (UPDATE scheduler_leader SET epoch = 1, instance_id = 'bench', since = now())
		INSERT INTO scheduler_partitions (partition_id, epoch, holder, since, renewed_at)
		SELECT p, 1, 'bench', now(), now() FROM generate_series(1, $1 - 1) AS p`, partitions)
	require.NoError(b, err)
	rows, err := db.Pool.Query(ctx, `
		SELECT scheduler_partition_of(k, $2), k
		FROM (SELECT format('job-%s', lpad(i::text, 6, '0')) FROM generate_series(1, $1) AS i) AS j (k)`,
		claimMinuteJobs, partitions)
	require.NoError(b, err)
	byPartition := make([][]string, partitions)
	for rows.Next() {
		var p int
		var job string
		require.NoError(b, rows.Scan(&p, &job))
		byPartition[p] = append(byPartition[p], job)
	}
	require.NoError(b, rows.Err())
	var batches []claimBatch
	for p, jobs := range byPartition {
		for len(jobs) > 0 {
			n := min(len(jobs), claimBatchMax)
			batches = append(batches, claimBatch{fence: store.Fence{Partition: p, Epoch: 1}, jobs: jobs[:n]})
			jobs = jobs[n:]
		}
	}
	return batches
}

// claimMinuteBatch claims one batch's slots in one transaction under its partition's fence
// and fails unless every claim won: the jobs are idle and the slot due.
func claimMinuteBatch(ctx context.Context, db *testdb.DB, batch claimBatch, slot time.Time) error {
	claims := make([]store.Claim, len(batch.jobs))
	for i, job := range batch.jobs {
		claims[i] = store.Claim{Job: job, ScheduledAt: slot, Trigger: store.TriggerSchedule, InstanceID: "bench"}
	}
	return db.Fenced(ctx, batch.fence, func(tx *store.Tx) error {
		outs, err := tx.ClaimSlots(ctx, claims)
		if err != nil {
			return err
		}
		for i, o := range outs {
			if o.Run == nil {
				return fmt.Errorf("claim of %s at %s did not win: %+v", claims[i].Job, slot, o)
			}
		}
		return nil
	})
}
