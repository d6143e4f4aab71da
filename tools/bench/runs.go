package main

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// runsShape is a data set of plan-change's finished runs, one per slot, the slots spread
// evenly over [now - age - span, now - age), each run in its day's partition (migration 0013).
type runsShape struct {
	kind      string // in the template's name
	span, age time.Duration
}

var (
	// historyRuns are the 30 days before now: what the API pages through under a 30-day
	// retention, about 30 day partitions.
	historyRuns = runsShape{kind: "history", span: 30 * 24 * time.Hour}
	// oldRuns are nine days' worth ending 31 days ago: ten day partitions (the span straddles
	// midnights), each past data-retention's 30-day window, which drops them all.
	oldRuns = runsShape{kind: "old", span: 9 * 24 * time.Hour, age: 31 * 24 * time.Hour}
)

// runsData is a built data set of runs.
type runsData struct {
	template string
	n        int
	from, to time.Time // the span of the slots
	days     int       // day partitions holding the runs
}

// seedRunsSQL inserts into the table %s the runs @lo to @hi - 1 of a data set of @n runs
// whose slots are spread evenly over @span seconds from @from, those whose slot falls in
// [@day_from, @day_to). Slots are whole seconds when the runs are fewer than the seconds,
// else fractions of one (the slot key only needs them distinct). A slot's run has the id
// job_run_id(slot), as a claim gives it.
const seedRunsSQL = `
INSERT INTO %s (id, job, trigger, status, scheduled_at, created_at, started_at, finished_at, instance_id, epoch, stats)
SELECT job_run_id(t), 'plan-change', 'schedule', 'succeeded', t, t, t, t + interval '2 seconds', 'bench', 1,
       '{"processed": 1000, "changed": 10, "skipped_locked": 0, "errors": 0}'
FROM (SELECT @from::timestamptz + make_interval(secs => CASE WHEN @n::bigint <= @span::bigint
                                                             THEN floor(i * @span::float8 / @n::bigint)
                                                             ELSE i * @span::float8 / @n::bigint END) AS t
      FROM generate_series(@lo::bigint, @hi::bigint - 1) AS i) s
WHERE t >= @day_from::timestamptz AND t < @day_to::timestamptz`

// runsTemplate builds (once per shape and size) the template database holding n runs of
// shape.
//
// A day whose partitions do not exist yet gets them as scheduler_add_run_day makes them,
// with its rows inserted before the indexes are built: tables LIKE job_runs and
// run_attempts, the rows, job_runs_partition_indexes, then ATTACH, which adds the primary
// key and the partitioned indexes. Each index is then built sorted in one pass instead of
// maintained row by row (about 1.5 times faster), and days load in parallel;
// checkPartitionSchema verifies that the result is the production schema.
func (b *bench) runsTemplate(ctx context.Context, shape runsShape, n int) (runsData, error) {
	name := fmt.Sprintf("runs_%s_%d_tmpl", shape.kind, n)
	if d, ok := b.runs[name]; ok {
		return d, nil
	}
	full, err := b.migratedDB(ctx, name)
	if err != nil {
		return runsData{}, err
	}
	t := time.Now()
	workers := min(runtime.NumCPU(), 4)
	conf, err := pgxpool.ParseConfig(b.url(full))
	if err != nil {
		return runsData{}, err
	}
	conf.MaxConns = int32(workers)
	conf.ConnConfig.RuntimeParams["maintenance_work_mem"] = "256MB"
	pool, err := pgxpool.NewWithConfig(ctx, conf)
	if err != nil {
		return runsData{}, err
	}
	defer pool.Close()

	d := runsData{template: full, n: n}
	if err := pool.QueryRow(ctx, `SELECT date_trunc('second', now())`).Scan(&d.to); err != nil {
		return runsData{}, err
	}
	d.to = d.to.UTC().Add(-shape.age)
	d.from = d.to.Add(-shape.span)
	var days []time.Time
	for day := time.Date(d.from.Year(), d.from.Month(), d.from.Day(), 0, 0, 0, 0, time.UTC); day.Before(d.to); day = day.AddDate(0, 0, 1) {
		days = append(days, day)
	}
	d.days = len(days)
	// The days scheduler_add_run_day has made (the migration's and addRunDays') get their
	// rows inserted into job_runs.
	rows, err := pool.Query(ctx, `SELECT relname::text FROM pg_class WHERE relkind = 'r' AND relname ~ '^job_runs_p[0-9]{8}$' ORDER BY 1`)
	if err != nil {
		return runsData{}, err
	}
	existing, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return runsData{}, err
	}

	work := make(chan time.Time)
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		inserted int64
		loadErr  error
	)
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for day := range work {
				k, err := d.seedDay(ctx, pool, day, slices.Contains(existing, partitionName("job_runs", day)))
				mu.Lock()
				inserted += k
				if err != nil && loadErr == nil {
					loadErr = fmt.Errorf("insert the job runs of %s: %w", day.Format(time.DateOnly), err)
				}
				mu.Unlock()
			}
		}()
	}
	for _, day := range days {
		mu.Lock()
		failed := loadErr != nil
		mu.Unlock()
		if failed {
			break
		}
		work <- day
	}
	close(work)
	wg.Wait()
	if loadErr != nil {
		return runsData{}, loadErr
	}
	if inserted != int64(n) {
		return runsData{}, fmt.Errorf("inserted %d job runs, want %d", inserted, n)
	}
	// The first day attached here against a day scheduler_add_run_day made.
	attached := slices.IndexFunc(days, func(day time.Time) bool {
		return !slices.Contains(existing, partitionName("job_runs", day))
	})
	if attached >= 0 && len(existing) > 0 {
		ref, err := time.Parse("20060102", strings.TrimPrefix(existing[0], "job_runs_p"))
		if err != nil {
			return runsData{}, err
		}
		if err := checkPartitionSchema(ctx, pool, days[attached], ref); err != nil {
			return runsData{}, err
		}
	}
	pool.Close()
	if err := b.finishTemplate(ctx, full); err != nil {
		return runsData{}, err
	}
	b.runs[name] = d
	b.log.Info("job_runs data set built", "kind", shape.kind, "rows", n, "days", d.days, "took", time.Since(t).Round(time.Millisecond))
	return d, nil
}

// partitionName is the name of table's (job_runs', run_attempts') partition of day.
func partitionName(table string, day time.Time) string { return table + "_p" + day.Format("20060102") }

// seedDay inserts the data set's runs of day (UTC midnight) and returns how many: into its
// partition when it exists, else into new tables it then attaches as the day's partitions.
func (d runsData) seedDay(ctx context.Context, pool *pgxpool.Pool, day time.Time, exists bool) (int64, error) {
	from, to := day, day.AddDate(0, 0, 1)
	if from.Before(d.from) {
		from = d.from
	}
	if to.After(d.to) {
		to = d.to
	}
	// Run i's slot is from + i·span/n: those of [from, to) are about i in [s·n/span, e·n/span),
	// a run more on each side for rounding, which the WHERE sorts out.
	span := int64(d.to.Sub(d.from) / time.Second)
	s, e := int64(from.Sub(d.from)/time.Second), int64(to.Sub(d.from)/time.Second)
	n := int64(d.n)
	args := pgx.NamedArgs{"from": d.from, "span": span, "n": n, "lo": max(0, s*n/span-1), "hi": min(n, e*n/span+2),
		"day_from": from, "day_to": to}
	runs, attempts := partitionName("job_runs", day), partitionName("run_attempts", day)
	if exists {
		tag, err := pool.Exec(ctx, fmt.Sprintf(seedRunsSQL, "job_runs"), args)
		return tag.RowsAffected(), err
	}
	ri, ai := pgx.Identifier{runs}.Sanitize(), pgx.Identifier{attempts}.Sanitize()
	for _, q := range []string{
		`CREATE TABLE ` + ri + ` (LIKE job_runs INCLUDING DEFAULTS INCLUDING CONSTRAINTS)`,
		`CREATE TABLE ` + ai + ` (LIKE run_attempts INCLUDING DEFAULTS INCLUDING CONSTRAINTS)`,
	} {
		if _, err := pool.Exec(ctx, q); err != nil {
			return 0, err
		}
	}
	tag, err := pool.Exec(ctx, fmt.Sprintf(seedRunsSQL, ri), args)
	if err != nil {
		return 0, err
	}
	// The day's ids: its UTC day number in the high bits.
	lo, hi := (day.Unix()/86400)<<37, (day.Unix()/86400+1)<<37
	if _, err := pool.Exec(ctx, `SELECT job_runs_partition_indexes($1)`, runs); err != nil {
		return 0, err
	}
	for _, q := range []string{
		fmt.Sprintf(`ALTER TABLE job_runs_days ATTACH PARTITION %s FOR VALUES FROM (%d) TO (%d)`, ri, lo, hi),
		fmt.Sprintf(`ALTER TABLE run_attempts ATTACH PARTITION %s FOR VALUES FROM (%d) TO (%d)`, ai, lo, hi),
	} {
		if _, err := pool.Exec(ctx, q); err != nil {
			return 0, err
		}
	}
	return tag.RowsAffected(), nil
}

// partitionSchemaSQL describes a partition's columns, constraints, indexes (with the
// partitioned index each belongs to), triggers and parent, its name replaced by "<p>".
const partitionSchemaSQL = `
SELECT replace(x, $1::text, '<p>') FROM (
    SELECT format('column %s %s %s, not null %s, identity %L, generated %L, default %s', a.attnum, a.attname,
                  format_type(a.atttypid, a.atttypmod), a.attnotnull, a.attidentity, a.attgenerated,
                  pg_get_expr(ad.adbin, ad.adrelid))
    FROM pg_attribute a LEFT JOIN pg_attrdef ad ON ad.adrelid = a.attrelid AND ad.adnum = a.attnum
    WHERE a.attrelid = $1::regclass AND a.attnum > 0 AND NOT a.attisdropped
    UNION ALL
    SELECT format('constraint %s %s', conname, pg_get_constraintdef(oid)) FROM pg_constraint WHERE conrelid = $1::regclass
    UNION ALL
    SELECT format('index %s of %s', pg_get_indexdef(i.indexrelid), h.inhparent::regclass)
    FROM pg_index i LEFT JOIN pg_inherits h ON h.inhrelid = i.indexrelid WHERE i.indrelid = $1::regclass
    UNION ALL
    SELECT format('trigger %s', pg_get_triggerdef(oid)) FROM pg_trigger WHERE tgrelid = $1::regclass
    UNION ALL
    SELECT format('partition of %s', inhparent::regclass) FROM pg_inherits WHERE inhrelid = $1::regclass
    UNION ALL
    SELECT format('relation %s %s %s', relkind, relpersistence, reloptions) FROM pg_class WHERE oid = $1::regclass
) s (x) ORDER BY 1`

// checkPartitionSchema compares the partitions of day that runsTemplate attached with
// those scheduler_add_run_day made for ref.
func checkPartitionSchema(ctx context.Context, pool *pgxpool.Pool, day, ref time.Time) error {
	for _, table := range []string{"job_runs", "run_attempts"} {
		var got, want []string
		for _, p := range []struct {
			name string
			dst  *[]string
		}{{partitionName(table, day), &got}, {partitionName(table, ref), &want}} {
			rows, err := pool.Query(ctx, partitionSchemaSQL, p.name)
			if err != nil {
				return err
			}
			if *p.dst, err = pgx.CollectRows(rows, pgx.RowTo[string]); err != nil {
				return err
			}
		}
		if !slices.Equal(got, want) {
			return fmt.Errorf("the bench's partition %s differs from scheduler_add_run_day's %s:\n%v\nwant\n%v",
				partitionName(table, day), partitionName(table, ref), got, want)
		}
	}
	return nil
}

// writerInsertSQL is the concurrent writer's statement: one finished manual run, its id
// the default (today's partition).
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

// benchRetention measures what one run of data-retention does to a concurrent writer of
// job_runs while it drops the old days: the writer's p99 during the run ÷ without it.
func benchRetention(ctx context.Context, b *bench) error {
	n := b.sz.retention
	data, err := b.runsTemplate(ctx, oldRuns, n)
	if err != nil {
		return err
	}
	// One repetition: the drop's samples are the writer's hundreds of inserts.
	var base, during []time.Duration
	var purge time.Duration
	var detail map[string]int64
	var maxRSS int64
	err = onCopy(ctx, b, data.template, func(pool *pgxpool.Pool, url string) error {
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
		purge, maxRSS, detail = res.took, res.maxRSSKB, res.stats.Detail
		return alone()
	})
	if err != nil {
		return err
	}
	// Every seeded day is past the window and goes; plan-change's newest run (also its newest
	// slot) moves to job_runs_kept first. The rows are the job's count: the dropped days'
	// reltuples, exact here since the template was vacuumed and analyzed.
	days, rows, kept := detail["job_runs_days"], detail["job_runs"], detail["job_runs_kept"]
	if days != int64(data.days) || kept != 1 {
		return fmt.Errorf("data-retention dropped %d days and kept %d runs, want %d days and 1 run (detail %v)",
			days, kept, data.days, detail)
	}
	if rows < int64(n)*99/100 || rows > int64(n)*101/100 {
		return fmt.Errorf("data-retention counts %d job runs in the days it dropped, want about %d", rows, n)
	}
	bp50, dp50 := percentile(base, 50), percentile(during, 50)
	bp99, dp99 := percentile(base, 99), percentile(during, 99)
	r := ratio(dp99, bp99)
	b.report.add(row{name: "data-retention: concurrent writer's p99 insert latency during the purge ÷ without it",
		data: fmt.Sprintf("%d days dropped (about %s old job_runs rows, the job's count) in %s",
			days, about(rows), dur(purge)),
		value: dur(dp99), ref: dur(bp99), ratio: fmt.Sprintf("%.2f", r), target: "≤ 1.2",
		pass: verdict(r <= 1.2),
		note: fmt.Sprintf("the job drops whole day partitions (each job's newest run moved to job_runs_kept, then DETACH PARTITION CONCURRENTLY and DROP of the day's job_runs and run_attempts): %d days dropped, %.0f ms a day, %d run kept; writer: one manual-run INSERT into job_runs every %s; %d inserts without the purge (%s before and after it) and %d during it; p50 %s without, %s during; child peak RSS %.1f MB; one repetition",
			days, float64(purge.Milliseconds())/float64(max(days, 1)), kept, writerInterval, len(base), b.sz.writerWindow,
			len(during), dur(bp50), dur(dp50), float64(maxRSS)/1024)})
	return nil
}

// about prints an estimate to three significant digits.
func about(n int64) string {
	switch {
	case n >= 1_000_000:
		return fmt.Sprintf("%.3g M", float64(n)/1e6)
	case n >= 1000:
		return fmt.Sprintf("%.3g k", float64(n)/1e3)
	}
	return fmt.Sprint(n)
}
