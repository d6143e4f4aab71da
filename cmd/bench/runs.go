package main

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// oldRunsSQL inserts $1 finished runs of plan-change, one per second-slot, all finished more
// than 40 days ago (data-retention keeps 30 days): the history the API pages through and the
// rows data-retention purges.
const oldRunsSQL = `
INSERT INTO job_runs (job, trigger, status, scheduled_at, created_at, started_at, finished_at, instance_id, epoch, stats)
SELECT 'plan-change', 'schedule', 'succeeded', t, t, t, t + interval '2 seconds', 'bench', 1,
       '{"processed": 1000, "changed": 10, "skipped_locked": 0, "errors": 0}'
FROM (SELECT date_trunc('second', now()) - interval '40 days' - make_interval(secs => $1::int - i) AS t
      FROM generate_series(1, $1::int) AS i) s`

// runsTemplate builds (once) the template database holding n old job_runs rows.
func (b *bench) runsTemplate(ctx context.Context, n int) (string, error) {
	name := fmt.Sprintf("runs_%d_tmpl", n)
	full := b.dbName(name)
	for _, c := range b.created {
		if c == full {
			return full, nil
		}
	}
	full, err := b.migratedDB(ctx, name)
	if err != nil {
		return "", err
	}
	t := time.Now()
	pool, err := pgxpool.New(ctx, b.url(full))
	if err != nil {
		return "", err
	}
	// Loading into the table without its secondary indexes (migrations 0001 and 0006) and building them afterwards
	// (sorted, in one pass) is several times faster than maintaining them row by row.
	_, err = pool.Exec(ctx, `DROP INDEX job_runs_slot_key, job_runs_job_id_idx, job_runs_job_status_id_idx, job_runs_job_trigger_id_idx`)
	if err == nil {
		_, err = pool.Exec(ctx, oldRunsSQL, n)
	}
	if err == nil {
		_, err = pool.Exec(ctx, `
SET maintenance_work_mem = '256MB';
CREATE UNIQUE INDEX job_runs_slot_key ON job_runs (job, scheduled_at) WHERE scheduled_at IS NOT NULL;
CREATE INDEX job_runs_job_id_idx ON job_runs (job, id DESC);
CREATE INDEX job_runs_job_status_id_idx ON job_runs (job, status, id DESC);
CREATE INDEX job_runs_job_trigger_id_idx ON job_runs (job, trigger, id DESC);`)
	}
	pool.Close()
	if err != nil {
		return "", fmt.Errorf("insert %d job runs: %w", n, err)
	}
	if err := b.finishTemplate(ctx, full); err != nil {
		return "", err
	}
	b.log.Info("job_runs data set built", "rows", n, "took", time.Since(t).Round(time.Millisecond))
	return full, nil
}

// writerInsertSQL is the concurrent writer's statement: one finished manual run.
const writerInsertSQL = `
INSERT INTO job_runs (job, trigger, status, started_at, finished_at, instance_id, stats)
VALUES ('bench-writer', 'manual', 'succeeded', now(), now(), 'writer', '{"processed": 1}')`

// writerInterval paces the writer: 100 inserts a second, well below what it could do, so its
// latency reflects waiting on the purge, not on itself.
const writerInterval = 10 * time.Millisecond

// writer inserts rows at a fixed rate until stop is closed and returns each insert's latency.
func writer(ctx context.Context, pool *pgxpool.Pool, stop <-chan struct{}) ([]time.Duration, error) {
	var lat []time.Duration
	tick := time.NewTicker(writerInterval)
	defer tick.Stop()
	for {
		select {
		case <-stop:
			return lat, nil
		case <-ctx.Done():
			return lat, ctx.Err()
		case <-tick.C:
		}
		start := time.Now()
		if _, err := pool.Exec(ctx, writerInsertSQL); err != nil {
			return lat, fmt.Errorf("writer insert: %w", err)
		}
		lat = append(lat, time.Since(start))
	}
}

func benchRetention(ctx context.Context, b *bench) error {
	n := b.sz.retention
	tmpl, err := b.runsTemplate(ctx, n)
	if err != nil {
		return err
	}
	// One repetition: a purge of millions of rows takes minutes; its samples are the writer's
	// hundreds of inserts.
	var base, during []time.Duration
	var purge time.Duration
	var deleted, maxRSS int64
	err = onCopy(ctx, b, tmpl, func(pool *pgxpool.Pool, url string) error {
		// The writer alone before and after the purge (pooled, so that a change in the shared
		// machine's load during the run weighs on both sides), and during the purge.
		alone := func() error {
			stop := make(chan struct{})
			time.AfterFunc(b.sz.writerWindow, func() { close(stop) })
			lat, err := writer(ctx, pool, stop)
			base = append(base, lat...)
			return err
		}
		if err := alone(); err != nil {
			return err
		}
		stop := make(chan struct{})
		var wg sync.WaitGroup
		var werr error
		wg.Add(1)
		go func() {
			defer wg.Done()
			during, werr = writer(ctx, pool, stop)
		}()
		res, err := runJobChild(ctx, "data-retention", url)
		close(stop)
		wg.Wait()
		if err != nil {
			return err
		}
		if werr != nil {
			return werr
		}
		purge, maxRSS, deleted = res.took, res.maxRSSKB, res.stats.Detail["job_runs"]
		return alone()
	})
	if err != nil {
		return err
	}
	// All but plan-change's newest slot row, which catch-up decides from.
	if want := int64(n - 1); deleted != want {
		return fmt.Errorf("data-retention deleted %d job runs, want %d", deleted, want)
	}
	bp50, dp50 := percentile(base, 50), percentile(during, 50)
	bp99, dp99 := percentile(base, 99), percentile(during, 99)
	b.report.add(row{name: "data-retention: concurrent writer's p99 insert latency during the purge ÷ without it",
		data:  fmt.Sprintf("%s old job_runs deleted in %s", count(n), dur(purge)),
		value: dur(dp99), ref: dur(bp99), ratio: fmt.Sprintf("%.2f", ratio(dp99, bp99)), target: "≤ 2",
		pass: verdict(ratio(dp99, bp99) <= 2),
		note: fmt.Sprintf("writer: one INSERT into job_runs every %s; %d inserts without the purge (%s before and after it) and %d during it; p50 %s without, %s during; default settings (batches of 5000, 50 ms pause); purge %.0f rows/s, child peak RSS %.1f MB; one repetition",
			writerInterval, len(base), b.sz.writerWindow, len(during), dur(bp50), dur(dp50),
			float64(n)/purge.Seconds(), float64(maxRSS)/1024)})
	return nil
}
