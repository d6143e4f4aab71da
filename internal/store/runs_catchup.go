package store

import (
	"context"
	"fmt"
	"time"
)

// What catch-up reads and writes in bulk: each job's first recorded slot, the slots recorded
// in a range, and the missed slots it records, one statement each for every job.

// FirstSlots returns, per job, the earliest scheduled_at recorded (absent: none), one probe
// of job_runs_slot_key each: the catch-up does not look for gaps before a job's first slot.
func (tx *Tx) FirstSlots(ctx context.Context, jobs []string) (map[string]time.Time, error) {
	rows, err := tx.Query(ctx, `
		SELECT j.job, (SELECT min(scheduled_at) FROM job_runs r WHERE r.job = j.job AND r.scheduled_at IS NOT NULL)
		FROM unnest($1::text[]) AS j (job)`, jobs)
	if err != nil {
		return nil, fmt.Errorf("read the first slots of %d jobs: %w", len(jobs), err)
	}
	defer rows.Close()
	first := make(map[string]time.Time, len(jobs))
	for rows.Next() {
		var job string
		var at *time.Time
		if err := rows.Scan(&job, &at); err != nil {
			return nil, fmt.Errorf("read the first slots of %d jobs: %w", len(jobs), err)
		}
		if at != nil {
			first[job] = *at
		}
	}
	return first, rows.Err()
}

// SlotRange is one job's slots between From and To, both included.
type SlotRange struct {
	Job      string
	From, To time.Time
}

// RecordedSlotsIn returns the slots with a row, whatever its status, inside each range: one
// range scan of job_runs_slot_key per job.
func (tx *Tx) RecordedSlotsIn(ctx context.Context, ranges []SlotRange) (map[string]map[int64]bool, error) {
	jobs := make([]string, len(ranges))
	from := make([]time.Time, len(ranges))
	to := make([]time.Time, len(ranges))
	for i, r := range ranges {
		jobs[i], from[i], to[i] = r.Job, r.From, r.To
	}
	rows, err := tx.Query(ctx, `
		SELECT r.job, r.scheduled_at
		FROM unnest($1::text[], $2::timestamptz[], $3::timestamptz[]) AS c (job, lo, hi)
		JOIN job_runs r ON r.job = c.job AND r.scheduled_at BETWEEN c.lo AND c.hi`, jobs, from, to)
	if err != nil {
		return nil, fmt.Errorf("read the recorded slots of %d jobs: %w", len(ranges), err)
	}
	defer rows.Close()
	recorded := make(map[string]map[int64]bool, len(ranges))
	for rows.Next() {
		var job string
		var at time.Time
		if err := rows.Scan(&job, &at); err != nil {
			return nil, fmt.Errorf("read the recorded slots of %d jobs: %w", len(ranges), err)
		}
		if recorded[job] == nil {
			recorded[job] = map[int64]bool{}
		}
		recorded[job][at.Unix()] = true
	}
	return recorded, rows.Err()
}

// RecordMissedSlots records each (jobs[i], slots[i]) as missed, leaving the slots that
// already have a row alone, and returns the ids of the rows it wrote, by job (the engine
// records their notifications in the same transaction). now is nil but in tests (NowOr).
func (tx *Tx) RecordMissedSlots(ctx context.Context, now *time.Time, jobs []string, slots []time.Time, instanceID string) (map[string][]int64, error) {
	rows, err := tx.Query(ctx, `
		INSERT INTO job_runs (id, job, trigger, status, scheduled_at, finished_at, instance_id, epoch, partition_id)
		SELECT job_run_id(c.slot), c.job, 'schedule', 'missed', c.slot, `+nowSQL(5)+`, $3, $4, $6
		FROM unnest($1::text[], $2::timestamptz[]) AS c (job, slot)
		ON CONFLICT DO NOTHING
		RETURNING id, job`, jobs, slots, instanceID, tx.epoch, now, tx.partition)
	if err != nil {
		return nil, fmt.Errorf("record %d missed slots: %w", len(slots), err)
	}
	defer rows.Close()
	written := map[string][]int64{}
	for rows.Next() {
		var id int64
		var job string
		if err := rows.Scan(&id, &job); err != nil {
			return nil, fmt.Errorf("record %d missed slots: %w", len(slots), err)
		}
		written[job] = append(written[job], id)
	}
	return written, rows.Err()
}
