package store

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/jackc/pgx/v5"
)

// job_settings: whether a job is paused, read with each job's latest runs for the API and
// the metrics a new leader reports from the cluster's history rather than from what this
// replica happened to see.

// JobHistory is one job's state as the metrics report it.
type JobHistory struct {
	Job string
	// LastSuccess is the finished_at of the job's newest succeeded run; zero when it never
	// succeeded.
	LastSuccess time.Time
	Paused      bool
}

// JobHistories returns, for each named job, its last success and whether it is paused. It
// costs one probe per job and day partition on job_runs_job_status_id_idx (job, status,
// id DESC), over the newest days first (newestRunsFirst): runs of one job overlap only
// with overlap allow, so the newest succeeded run by id is the last to finish (of an allow
// job's runs that overlapped, it may be one that finished a moment before another).
// The status range, rather than an equality, keeps the planner on that index: with status =
// 'succeeded' it walks the primary key backwards and filters, reading the whole history of
// a job that never succeeded (EXPLAIN on 500 000 runs: 10 buffers against 7 900).
func (q queries) JobHistories(ctx context.Context, jobs []string) ([]JobHistory, error) {
	var list []JobHistory
	err := q.newestRunsFirst(ctx, jobs, func(jobs []string, from, before int64) ([]string, error) {
		rows, err := q.q.Query(ctx, `
			SELECT j.name, r.finished_at
			FROM unnest($1::text[]) AS j(name)
			CROSS JOIN LATERAL (
				SELECT finished_at FROM job_runs
				WHERE job = j.name AND status >= 'succeeded' AND status <= 'succeeded'
				  AND id >= $2 AND id < $3
				ORDER BY status, id DESC LIMIT 1
			) AS r`, jobs, from, before)
		if err != nil {
			return nil, err
		}
		found, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (JobHistory, error) {
			var h JobHistory
			return h, row.Scan(&h.Job, &h.LastSuccess)
		})
		list = append(list, found...)
		names := make([]string, len(found))
		for i, h := range found {
			names[i] = h.Job
		}
		return names, err
	})
	if err != nil {
		return nil, fmt.Errorf("read job histories: %w", err)
	}
	paused, err := q.pausedJobs(ctx, jobs)
	if err != nil {
		return nil, err
	}
	seen := make(map[string]bool, len(list))
	for i := range list {
		seen[list[i].Job] = true
		list[i].Paused = paused[list[i].Job]
	}
	for _, job := range jobs {
		if !seen[job] {
			list = append(list, JobHistory{Job: job, Paused: paused[job]})
		}
	}
	return list, nil
}

// JobStates returns, for each named job, whether it is paused and its most recent run (nil
// when it never ran), with the database's clock, so "next run" is computed on the clock
// every replica shares.
func (q queries) JobStates(ctx context.Context, jobs []string) (now time.Time, paused map[string]bool, last map[string]*Run, err error) {
	if err := q.q.QueryRow(ctx, `SELECT now()`).Scan(&now); err != nil {
		return now, nil, nil, fmt.Errorf("read the database's clock: %w", err)
	}
	if paused, err = q.pausedJobs(ctx, jobs); err != nil {
		return now, nil, nil, err
	}
	// One index probe per job and day on job_runs_job_id_idx (the job range and order keep
	// the planner off a backward primary-key walk; see listRunsSQL). A dry run is not the
	// job's last run: it would hide a real failure behind a run that did nothing.
	last = make(map[string]*Run, len(jobs))
	err = q.newestRunsFirst(ctx, jobs, func(jobs []string, from, before int64) ([]string, error) {
		rows, err := q.q.Query(ctx, `
			SELECT r.* FROM unnest($1::text[]) AS j(name)
			CROSS JOIN LATERAL (
				SELECT `+runColumns+` FROM job_runs
				WHERE job >= j.name AND job <= j.name AND id >= $2 AND id < $3
				  AND NOT params @> '{"dry_run": true}'
				ORDER BY job, id DESC LIMIT 1
			) AS r`, jobs, from, before)
		if err != nil {
			return nil, err
		}
		list, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (*Run, error) { return scanRun(row) })
		names := make([]string, len(list))
		for i, r := range list {
			last[r.Job], names[i] = r, r.Job
		}
		return names, err
	})
	if err != nil {
		return now, nil, nil, fmt.Errorf("read last runs: %w", err)
	}
	return now, paused, last, nil
}

// newestRunsFirst calls read for the jobs over today's ids, then over yesterday's for the
// jobs it found nothing for, then over the older days for the rest. read returns the jobs
// it found something for; it reads ids in [from, before). A job's newest run is most often
// today's: each bound is a probe of the job's index in one day partition (and
// job_runs_kept), where an open upper bound probes the empty days ahead too. At 10 000 jobs
// that was 83 of the job list's milliseconds against about 30. The days ahead are read
// only when they hold a run (a slot's id carries its day), so the bounds change no answer.
func (q queries) newestRunsFirst(ctx context.Context, jobs []string, read func(jobs []string, from, before int64) (found []string, err error)) error {
	yesterday := recentIDFloor(0, time.Now())
	if yesterday == 0 {
		_, err := read(jobs, 0, math.MaxInt64)
		return err
	}
	today, tomorrow := yesterday+1<<dayIDShift, yesterday+2<<dayIDShift
	var ahead bool
	if err := q.q.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM job_runs WHERE id >= $1)`, tomorrow).Scan(&ahead); err != nil {
		return err
	}
	if ahead {
		tomorrow = math.MaxInt64
	}
	for _, r := range [][2]int64{{today, tomorrow}, {yesterday, today}, {0, yesterday}} {
		found, err := read(jobs, r[0], r[1])
		if err != nil || len(found) == len(jobs) {
			return err
		}
		jobs = jobsNotIn(jobs, found)
	}
	return nil
}

// jobsNotIn returns the jobs that are not in found.
func jobsNotIn(jobs, found []string) []string {
	done := make(map[string]bool, len(found))
	for _, job := range found {
		done[job] = true
	}
	rest := make([]string, 0, len(jobs)-len(found))
	for _, job := range jobs {
		if !done[job] {
			rest = append(rest, job)
		}
	}
	return rest
}

// pausedJobs returns which of jobs are paused (job_settings).
func (q queries) pausedJobs(ctx context.Context, jobs []string) (map[string]bool, error) {
	rows, err := q.q.Query(ctx, `SELECT job, paused FROM job_settings WHERE job = ANY ($1::text[])`, jobs)
	if err != nil {
		return nil, fmt.Errorf("read job settings: %w", err)
	}
	paused := make(map[string]bool, len(jobs))
	for rows.Next() {
		var job string
		var p bool
		if err := rows.Scan(&job, &p); err != nil {
			rows.Close()
			return nil, fmt.Errorf("read job settings: %w", err)
		}
		paused[job] = p
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read job settings: %w", err)
	}
	return paused, nil
}

// SetPaused records in job_settings that job is paused (or not). Every replica, and the next
// leader, reads it from there.
func (q queries) SetPaused(ctx context.Context, job string, paused bool) error {
	_, err := q.q.Exec(ctx, `
		INSERT INTO job_settings (job, paused, updated_at) VALUES ($1, $2, now())
		ON CONFLICT (job) DO UPDATE SET paused = EXCLUDED.paused, updated_at = EXCLUDED.updated_at`,
		job, paused)
	if err != nil {
		return fmt.Errorf("set paused=%t for job %s: %w", paused, job, err)
	}
	return nil
}

// ConsecutiveFailures reports whether job's last n finished runs since it was last resumed
// all failed or timed out (skipped and missed slots are not runs), while it is not paused
// already: a resumed job gets n more tries. One backward probe of job_runs_job_id_idx.
func (q queries) ConsecutiveFailures(ctx context.Context, job string, n int) (bool, error) {
	const last = `
		SELECT count(*) = $2 AND bool_and(status IN ('failed', 'timed_out'))
		       AND NOT coalesce((SELECT paused FROM job_settings WHERE job = $1), false)
		FROM (SELECT status FROM job_runs
		      WHERE job = $1 AND status IN ('succeeded', 'failed', 'timed_out', 'cancelled', 'abandoned')
		        AND created_at > coalesce((SELECT updated_at FROM job_settings WHERE job = $1), '-infinity')
		      ORDER BY id DESC LIMIT $2) AS r`
	var failing *bool
	if err := q.q.QueryRow(ctx, last, job, n).Scan(&failing); err != nil {
		return false, fmt.Errorf("read the last runs of %s: %w", job, err)
	}
	return failing != nil && *failing, nil
}
