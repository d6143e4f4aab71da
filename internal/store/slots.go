package store

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// SlotRuns returns the job's runs of the slots from since to until (both included), the
// newest slot first and, for one slot, the newest run first: what became of each slot the
// schedule named, for GET …/jobs/{name}/slots.
func (q queries) SlotRuns(ctx context.Context, job string, since, until time.Time) ([]*Run, error) {
	rows, err := q.q.Query(ctx, `SELECT `+runColumns+` FROM job_runs
		WHERE job = $1 AND scheduled_at >= $2 AND scheduled_at <= $3
		ORDER BY scheduled_at DESC, id DESC`, job, since, until)
	if err != nil {
		return nil, fmt.Errorf("read the slots of %s: %w", job, err)
	}
	runs, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (*Run, error) { return scanRun(row) })
	if err != nil {
		return nil, fmt.Errorf("read the slots of %s: %w", job, err)
	}
	return runs, nil
}

// FirstSlot returns the earliest slot the job has a row for, or the zero time: a built-in
// job's slots before it are not expected of it.
func (q queries) FirstSlot(ctx context.Context, job string) (time.Time, error) {
	var first *time.Time
	err := q.q.QueryRow(ctx, `SELECT min(scheduled_at) FROM job_runs WHERE job = $1`, job).Scan(&first)
	if err != nil || first == nil {
		return time.Time{}, err
	}
	return *first, nil
}

// RecordedSlots returns, of the jobs named, the slots after from and up to to that have a
// row, by job: what the leader's slot audit compares with the schedules.
func (q queries) RecordedSlots(ctx context.Context, jobs []string, from, to time.Time) (map[string]map[time.Time]bool, error) {
	rows, err := q.q.Query(ctx, `SELECT job, scheduled_at FROM job_runs
		WHERE job = ANY($1) AND scheduled_at > $2 AND scheduled_at <= $3`, jobs, from, to)
	if err != nil {
		return nil, fmt.Errorf("read the recorded slots: %w", err)
	}
	defer rows.Close()
	out := make(map[string]map[time.Time]bool)
	for rows.Next() {
		var job string
		var at time.Time
		if err := rows.Scan(&job, &at); err != nil {
			return nil, fmt.Errorf("read the recorded slots: %w", err)
		}
		if out[job] == nil {
			out[job] = make(map[time.Time]bool)
		}
		out[job][at.UTC()] = true
	}
	return out, rows.Err()
}
