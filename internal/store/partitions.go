package store

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// The day partitions of job_runs and run_attempts (migration 0013): a run's id carries the
// UTC day of its slot (of its creation without one), and each day's runs and call attempts
// have a partition of each table. The leader adds the days ahead; data-retention drops the
// days past its window whole, so that a purge costs the same at a million rows as at a
// hundred million and never deletes row by row beside the writers.

// DaysAhead is how many days past today AddRunDays keeps partitions for: a leader that
// stays away that long before the next one is elected still finds every day in place.
const DaysAhead = 3

// AddRunDays makes sure the partitions of the days from yesterday (on the database's clock,
// UTC: a slot of 23:59 claimed after midnight) to DaysAhead days after today exist, and
// returns the days it created.
func (db *DB) AddRunDays(ctx context.Context) ([]time.Time, error) {
	rows, err := db.pool.Query(ctx, `
		SELECT d::date FROM generate_series(-1, $1::int) AS n,
		     LATERAL (SELECT (now() AT TIME ZONE 'UTC')::date + n AS d) AS day
		WHERE scheduler_add_run_day(d)`, DaysAhead)
	if err != nil {
		return nil, fmt.Errorf("add the day partitions of job_runs: %w", err)
	}
	days, err := pgx.CollectRows(rows, pgx.RowTo[time.Time])
	if err != nil {
		return nil, fmt.Errorf("add the day partitions of job_runs: %w", err)
	}
	return days, nil
}

// AddRunDaysFor makes sure the day partitions of the given slots exist, inside the caller's
// fenced transaction, and returns the days it created. A leader elected after more than
// DaysAhead days without one, or on a restored backup, catches up slots of days nobody
// created a partition for: without one their rows could not be written, and the catch-up
// of every job deciding beside them would fail with them. A slot from before migration
// 0013's cutover needs none (it goes to job_runs_legacy). In the common case, every day
// present, it costs one statement and takes no lock.
func (tx *Tx) AddRunDaysFor(ctx context.Context, slots []time.Time) ([]time.Time, error) {
	seen := map[time.Time]bool{}
	var days []time.Time
	for _, s := range slots {
		d := s.UTC().Truncate(24 * time.Hour)
		if !seen[d] {
			seen[d] = true
			days = append(days, d)
		}
	}
	if len(days) == 0 {
		return nil, nil
	}
	// CASE, not AND: the partition is created only for a day found without one, whatever
	// order the planner would give the conditions.
	rows, err := tx.Query(ctx, `
		SELECT d FROM unnest($1::date[]) AS d
		WHERE CASE WHEN (d::timestamp AT TIME ZONE 'UTC') >= job_run_cutover()
		            AND to_regclass('job_runs_p' || to_char(d, 'YYYYMMDD')) IS NULL
		      THEN scheduler_add_run_day(d) ELSE false END`, days)
	if err != nil {
		return nil, fmt.Errorf("add the day partitions of job_runs for %d days: %w", len(days), err)
	}
	added, err := pgx.CollectRows(rows, pgx.RowTo[time.Time])
	if err != nil {
		return nil, fmt.Errorf("add the day partitions of job_runs for %d days: %w", len(days), err)
	}
	return added, nil
}

// RunDay is one day partition of job_runs (and its run_attempts twin).
type RunDay struct {
	Table string // job_runs_pYYYYMMDD, or job_runs_legacy for the ids from before migration 0013
	// End is when the day ends (UTC): the partition holds the runs of slots before it.
	End time.Time
	// Rows is PostgreSQL's estimate of the partition's rows (reltuples).
	Rows int64
	// Active says a run of the day is still queued or running, which keeps the day.
	Active bool
}

// DroppedDays is what DropRunDays did.
type DroppedDays struct {
	Dropped []RunDay // dropped (with dryRun: would be)
	Kept    []RunDay // past the window, kept for an active run
	// KeptRuns counts the runs moved to job_runs_kept: each job's newest run and newest slot.
	KeptRuns int64
	// Pruned counts the rows of job_runs_kept that a newer run made unneeded, deleted.
	Pruned int64
}

var dayTable = regexp.MustCompile(`^job_runs_p(\d{8})$`)

// RunDays lists the day partitions of job_runs, attached or left detached by an
// interrupted DropRunDays, oldest first.
func (db *DB) RunDays(ctx context.Context) ([]RunDay, error) {
	rows, err := db.pool.Query(ctx, `
		SELECT c.relname, c.reltuples::bigint,
		       CASE WHEN c.relname = 'job_runs_legacy' THEN job_run_cutover() END
		FROM pg_class c
		WHERE c.relkind = 'r' AND c.relnamespace = current_schema()::regnamespace
		  AND (c.relname ~ '^job_runs_p[0-9]{8}$' OR c.relname = 'job_runs_legacy')
		ORDER BY c.relname = 'job_runs_legacy' DESC, c.relname`)
	if err != nil {
		return nil, fmt.Errorf("list the day partitions of job_runs: %w", err)
	}
	var days []RunDay
	for rows.Next() {
		var d RunDay
		var cutover *time.Time
		if err := rows.Scan(&d.Table, &d.Rows, &cutover); err != nil {
			rows.Close()
			return nil, fmt.Errorf("list the day partitions of job_runs: %w", err)
		}
		d.Rows = max(d.Rows, 0)
		if m := dayTable.FindStringSubmatch(d.Table); m != nil {
			day, err := time.Parse("20060102", m[1])
			if err != nil {
				rows.Close()
				return nil, fmt.Errorf("partition %s: %w", d.Table, err)
			}
			d.End = day.AddDate(0, 0, 1)
		} else if cutover != nil {
			d.End = *cutover // job_runs_legacy: the runs of the days before the cutover
		}
		days = append(days, d)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list the day partitions of job_runs: %w", err)
	}
	return days, nil
}

// DropRunDays drops the day partitions of job_runs and run_attempts whose day ended before
// before, except a day with a queued or running run. What must outlive its day moves to
// job_runs_kept first: each job's newest run (the job list's "last run") and newest slot
// (catch-up decides from it: without it a yearly job's slot would look unrecorded to the
// next leader). A kept run's call attempts go with its day. A dry run changes nothing and
// reports what it would do.
//
// Each day goes in three steps, none of which stops a writer: one transaction moves the
// kept runs (an UPDATE of kept, which moves each row to job_runs_kept atomically), then
// DETACH PARTITION CONCURRENTLY of the day's two tables, then DROP TABLE. A drop
// interrupted between the steps leaves a detached table that the next call finishes.
func (db *DB) DropRunDays(ctx context.Context, before time.Time, dryRun bool) (DroppedDays, error) {
	var out DroppedDays
	days, err := db.RunDays(ctx)
	if err != nil {
		return out, err
	}
	for _, d := range days {
		if d.End.After(before) {
			break
		}
		table := pgx.Identifier{d.Table}.Sanitize()
		if err := db.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM `+table+
			` WHERE status IN ('queued', 'running'))`).Scan(&d.Active); err != nil {
			return out, fmt.Errorf("look for active runs in %s: %w", d.Table, err)
		}
		if d.Active {
			out.Kept = append(out.Kept, d)
			continue
		}
		if dryRun {
			out.Dropped = append(out.Dropped, d)
			continue
		}
		kept, err := db.keepNewest(ctx, d.Table)
		if err != nil {
			return out, err
		}
		attempts := "run_attempts" + strings.TrimPrefix(d.Table, "job_runs")
		for _, t := range []string{d.Table, attempts} {
			if err := db.detach(ctx, t); err != nil {
				return out, err
			}
		}
		if _, err := db.pool.Exec(ctx, `DROP TABLE IF EXISTS `+table+`, `+pgx.Identifier{attempts}.Sanitize()); err != nil {
			return out, fmt.Errorf("drop %s: %w", d.Table, err)
		}
		out.KeptRuns += kept
		out.Dropped = append(out.Dropped, d)
	}
	if dryRun {
		return out, nil
	}
	out.Pruned, err = db.pruneKept(ctx)
	return out, err
}

// keepNewest moves to job_runs_kept the runs of a day partition that are their job's newest
// run, or newest slot, with nothing newer of the job left in job_runs. The newest per job
// are found with a loose index scan of (job, id DESC): one index descent per job rather than
// a read of the whole day. A detached partition (an interrupted drop) has already been
// through it and is left alone.
func (db *DB) keepNewest(ctx context.Context, partition string) (int64, error) {
	t := pgx.Identifier{partition}.Sanitize()
	keep := fmt.Sprintf(`
		WITH RECURSIVE jobs (job) AS (
			(SELECT job FROM %[1]s ORDER BY job LIMIT 1)
			UNION ALL
			SELECT (SELECT job FROM %[1]s WHERE job > jobs.job ORDER BY job LIMIT 1) FROM jobs
			WHERE jobs.job IS NOT NULL
		), newest AS (
			SELECT (SELECT id FROM %[1]s WHERE job = jobs.job ORDER BY job, id DESC LIMIT 1) AS id
			FROM jobs WHERE job IS NOT NULL
			UNION
			SELECT (SELECT id FROM %[1]s WHERE job = jobs.job AND scheduled_at IS NOT NULL
			        ORDER BY job, scheduled_at DESC LIMIT 1)
			FROM jobs WHERE job IS NOT NULL
		), kept AS (
			UPDATE job_runs r SET kept = true
			FROM %[1]s d JOIN newest USING (id)
			WHERE r.id = d.id AND NOT r.kept
			  AND (NOT EXISTS (SELECT 1 FROM job_runs n WHERE n.job = d.job AND n.id > d.id)
			       OR (d.scheduled_at IS NOT NULL AND NOT EXISTS (
			           SELECT 1 FROM job_runs n WHERE n.job = d.job AND n.scheduled_at > d.scheduled_at)))
			RETURNING r.id
		)
		SELECT count(*) FROM kept`, t)
	var attached bool
	if err := db.pool.QueryRow(ctx, `
		SELECT EXISTS (SELECT 1 FROM pg_inherits WHERE inhrelid = to_regclass($1) AND NOT inhdetachpending)`,
		partition).Scan(&attached); err != nil || !attached {
		return 0, err
	}
	var kept int64
	if err := db.pool.QueryRow(ctx, keep).Scan(&kept); err != nil {
		return 0, fmt.Errorf("keep the newest runs of %s: %w", partition, err)
	}
	return kept, nil
}

// detach detaches a partition without blocking its table's writers, or finishes a detach
// that was interrupted; a table already detached is left as it is.
func (db *DB) detach(ctx context.Context, table string) error {
	var parent string
	var pending bool
	err := db.pool.QueryRow(ctx, `
		SELECT i.inhparent::regclass::text, i.inhdetachpending
		FROM pg_inherits i WHERE i.inhrelid = to_regclass($1)`, table).Scan(&parent, &pending)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("detach %s: %w", table, err)
	}
	how := "CONCURRENTLY"
	if pending {
		how = "FINALIZE"
	}
	_, err = db.pool.Exec(ctx, fmt.Sprintf(`ALTER TABLE %s DETACH PARTITION %s %s`,
		pgx.Identifier{parent}.Sanitize(), pgx.Identifier{table}.Sanitize(), how))
	if err != nil {
		return fmt.Errorf("detach %s: %w", table, err)
	}
	return nil
}

// pruneKept deletes the rows of job_runs_kept that are no longer their job's newest run or
// newest slot.
func (db *DB) pruneKept(ctx context.Context) (int64, error) {
	tag, err := db.pool.Exec(ctx, `
		DELETE FROM job_runs_kept k
		WHERE EXISTS (SELECT 1 FROM job_runs n WHERE n.job = k.job AND n.id > k.id)
		  AND (k.scheduled_at IS NULL OR EXISTS (
		       SELECT 1 FROM job_runs n WHERE n.job = k.job AND n.scheduled_at > k.scheduled_at))`)
	if err != nil {
		return 0, fmt.Errorf("prune job_runs_kept: %w", err)
	}
	return tag.RowsAffected(), nil
}
