package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// Jobs that follow jobs (`after`, migration 0031). A child's run is made by the transaction
// that ends a parent's run (endRuns, the one statement that ends a run), never by a leader's
// later look at what ended: so a child's slot is decided exactly when its last parent's end
// commits, whichever leader, replica or API request ends it, and not at all if that end
// rolls back.
//
// The child's slots are its first parent's: slot S of the first parent is the child's slot
// S, once the first parent's run of S and each other parent's run of its latest slot at or
// before S succeeded (a recovery run counts for the slot it recovered). The child's row of
// slot S is its only row there (job, scheduled_at S, rerun 0: the slot index keeps it one),
// so a parent's retry, recovery or re-run that succeeds again finds the row and adds none.
// A parent run that fails or times out records the child's slot skipped, reason
// ReasonParentFailed, while no run of the parent's slot succeeded; a later success of that
// slot (a re-run) turns the skipped row into the child's queued run, once.
//
// Every decision runs under activeRunsLock, taken after the end statement: two parents
// ending at once on two replicas decide one after the other, and the second, whose
// statements see the first one's commit, finds both parents succeeded. A child that has its
// bound of active runs when its slot is decided keeps the slot in scheduler_after_waiting, and
// the end of its active run queues it, in that end's transaction.

// TriggerAfter is the trigger of a child's run.
const TriggerAfter = "after"

// ReasonParentFailed is the reason of a child's slot whose parent's run failed.
const ReasonParentFailed = "parent failed"

// maxFollowedSlots bounds the child slots one parent end decides: a later parent's slot
// completes the first parent's slots up to its own next slot, a few in any real chain.
const maxFollowedSlots = 100

// follow records what the ends mean for the ended runs' children and waiting slots, in the
// end's transaction. Only the ends whose job has children or waiting slots do anything.
func (q queries) follow(ctx context.Context, ended []Ended) error {
	locked := false
	for _, e := range ended {
		if !e.follow {
			continue
		}
		if !locked {
			// One lock for every chain's decisions, whatever partitions the children are in:
			// partition 0's active-runs row, taken before the children's rows are written
			// (whose trigger then takes their own partitions' rows).
			if err := lockRow(ctx, q.q, activeRunsLock); err != nil {
				return err
			}
			locked = true
		}
		if err := q.followParent(ctx, e); err != nil {
			return fmt.Errorf("record what run %d's end means for the jobs after %s: %w", e.ID, e.Job, err)
		}
		if err := q.queueWaiting(ctx, e.Job); err != nil {
			return fmt.Errorf("queue the waiting slots of %s: %w", e.Job, err)
		}
	}
	return nil
}

// child is a job after an ended run's job.
type child struct {
	name      string
	parents   []string
	partition int
	paused    bool
}

// childrenSQL is the enabled jobs that name $1 as a parent, and whether each is paused.
const childrenSQL = `
SELECT d.name, d.after_keys, d.partition_id, coalesce(s.paused, false) FROM job_definitions d
LEFT JOIN job_settings s ON s.job = d.name
WHERE d.after_keys @> ARRAY[$1::text] AND coalesce(d.definition->>'enabled', 'true') <> 'false'
ORDER BY d.name`

// candidateSlotsSQL is the first parent's ($1) slots that the slot $3 of another parent ($2)
// is the latest slot at or before: from $3 up to that parent's next recorded slot.
const candidateSlotsSQL = `
SELECT DISTINCT scheduled_at FROM job_runs
WHERE job = $1 AND scheduled_at >= $3
  AND scheduled_at < coalesce((SELECT min(scheduled_at) FROM job_runs WHERE job = $2 AND scheduled_at > $3), 'infinity')
ORDER BY scheduled_at
LIMIT $4`

// followParent decides the child slots the parent run e's end completes or fails.
func (q queries) followParent(ctx context.Context, e Ended) error {
	failed := e.Status == StatusFailed || e.Status == StatusTimedOut
	if e.Status != StatusSucceeded && !failed {
		return nil // cancelled or abandoned: the slot may still be run again (a recovery)
	}
	var slot *time.Time
	if err := q.q.QueryRow(ctx, `SELECT job_run_slot($1)`, e.ID).Scan(&slot); err != nil {
		return fmt.Errorf("read the slot of run %d: %w", e.ID, err)
	}
	if slot == nil {
		return nil // a manual run has no slot for children to follow
	}
	rows, err := q.q.Query(ctx, childrenSQL, e.Job)
	if err != nil {
		return fmt.Errorf("read the children: %w", err)
	}
	children, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (child, error) {
		var c child
		err := row.Scan(&c.name, &c.parents, &c.partition, &c.paused)
		return c, err
	})
	if err != nil {
		return fmt.Errorf("read the children: %w", err)
	}
	for _, c := range children {
		slots := []time.Time{*slot}
		if c.parents[0] != e.Job {
			rows, err := q.q.Query(ctx, candidateSlotsSQL, c.parents[0], e.Job, *slot, maxFollowedSlots)
			if err != nil {
				return fmt.Errorf("read the slots of %s: %w", c.parents[0], err)
			}
			if slots, err = pgx.CollectRows(rows, pgx.RowTo[time.Time]); err != nil {
				return fmt.Errorf("read the slots of %s: %w", c.parents[0], err)
			}
		}
		for _, s := range slots {
			if err := q.decideChildSlot(ctx, c, s, e, failed); err != nil {
				return fmt.Errorf("decide the slot %s of %s: %w", s.UTC().Format(time.RFC3339), c.name, err)
			}
		}
	}
	return nil
}

// childSlotSQL is the child's row of slot $2 (none: id 0) and whether the slot waits.
const childSlotSQL = `
SELECT coalesce((SELECT id FROM job_runs WHERE job = $1 AND scheduled_at = $2 AND rerun = 0), 0),
       coalesce((SELECT status = 'skipped' AND trigger = 'after' FROM job_runs WHERE job = $1 AND scheduled_at = $2 AND rerun = 0), false),
       EXISTS (SELECT 1 FROM scheduler_after_waiting WHERE job = $1 AND scheduled_at = $2)`

// parentRunsSQL is, for each parent of $1 in order, the first succeeded run of its slot that
// matches the child's slot $2 (the first parent's slot $2, each other parent's latest
// recorded slot at or before it), or NULL.
const parentRunsSQL = `
SELECT (SELECT s.id FROM job_slot_runs(k.p, m.slot) s WHERE s.status = 'succeeded' ORDER BY s.created_at, s.id LIMIT 1)
FROM unnest($1::text[]) WITH ORDINALITY AS k (p, i)
CROSS JOIN LATERAL (
	SELECT CASE WHEN k.i = 1 THEN $2::timestamptz
	            ELSE (SELECT max(r.scheduled_at) FROM job_runs r WHERE r.job = k.p AND r.scheduled_at <= $2) END AS slot
) m
ORDER BY k.i`

// decideChildSlot records the child's slot s: queued (or waiting) once every parent's
// matching run succeeded, skipped when e, a run of one of them, failed and its slot has no
// success. A slot that has its row already (run, or skipped and still not complete) or waits
// keeps it.
func (q queries) decideChildSlot(ctx context.Context, c child, s time.Time, e Ended, failed bool) error {
	var rowID int64
	var skipped, waiting bool
	if err := q.q.QueryRow(ctx, childSlotSQL, c.name, s).Scan(&rowID, &skipped, &waiting); err != nil {
		return err
	}
	if waiting || (rowID != 0 && !skipped) {
		return nil // decided already: exactly one run per slot
	}
	rows, err := q.q.Query(ctx, parentRunsSQL, c.parents, s)
	if err != nil {
		return err
	}
	runs, err := pgx.CollectRows(rows, pgx.RowTo[*int64])
	if err != nil {
		return err
	}
	var ids []int64
	for i, id := range runs {
		switch {
		case id != nil:
			ids = append(ids, *id)
		case failed && c.parents[i] == e.Job && rowID == 0:
			return q.skipChildSlot(ctx, c, s, []int64{e.ID}, ReasonParentFailed)
		default:
			return nil // a parent has not succeeded (yet): the slot is pending
		}
	}
	if c.paused {
		// As a paused job's own slots: recorded skipped, and a later success of a parent's
		// slot (a re-run, once resumed) runs it.
		if rowID != 0 {
			return nil
		}
		return q.skipChildSlot(ctx, c, s, ids, ReasonPaused)
	}
	return q.queueChildSlot(ctx, c.name, c.partition, s, ids, rowID)
}

// skipChildSlot records the child's slot skipped, for reason, linked to the parent runs.
func (q queries) skipChildSlot(ctx context.Context, c child, s time.Time, parentRuns []int64, reason string) error {
	const skip = `
		INSERT INTO job_runs (id, job, trigger, status, scheduled_at, finished_at, reason, parent_run_ids, partition_id)
		VALUES (job_run_id($2), $1, 'after', 'skipped', $2, now(), $5, $3, $4)
		ON CONFLICT DO NOTHING`
	_, err := q.q.Exec(ctx, skip, c.name, s, parentRuns, c.partition, reason)
	return err
}

// queueChildSlot makes the child's slot s, whose parents' runs ids succeeded, its queued run
// (turning its skipped row rowID, if any, into it), or, while the child has its bound of
// active runs, a waiting slot.
func (q queries) queueChildSlot(ctx context.Context, job string, partition int, s time.Time, ids []int64, rowID int64) error {
	var busy bool
	if err := q.q.QueryRow(ctx, busySQL, job).Scan(&busy); err != nil {
		return fmt.Errorf("count the active runs of %s: %w", job, err)
	}
	if busy {
		_, err := q.q.Exec(ctx, `INSERT INTO scheduler_after_waiting (job, scheduled_at, parent_run_ids, partition_id)
			VALUES ($1, $2, $3, $4) ON CONFLICT DO NOTHING`, job, s, ids, partition)
		return err
	}
	if rowID != 0 {
		_, err := q.q.Exec(ctx, `UPDATE job_runs
			SET status = 'queued', parent_run_ids = $2, reason = NULL, error = NULL, started_at = NULL, finished_at = NULL
			WHERE id = $1 AND status = 'skipped'`, rowID, ids)
		return err
	}
	_, err := q.q.Exec(ctx, `INSERT INTO job_runs (id, job, trigger, status, scheduled_at, parent_run_ids, partition_id)
		VALUES (job_run_id($2), $1, 'after', 'queued', $2, $3, $4) ON CONFLICT DO NOTHING`, job, s, ids, partition)
	return err
}

// queueWaiting queues the job's waiting slots, oldest first, while it is under its bound.
func (q queries) queueWaiting(ctx context.Context, job string) error {
	for {
		var s time.Time
		var ids []int64
		var partition int
		err := q.q.QueryRow(ctx, `DELETE FROM scheduler_after_waiting
			WHERE (job, scheduled_at) = (SELECT job, scheduled_at FROM scheduler_after_waiting WHERE job = $1
			                             AND (`+activeSQL+`) < job_run_bound($1) ORDER BY scheduled_at LIMIT 1)
			RETURNING scheduled_at, parent_run_ids, partition_id`, job).Scan(&s, &ids, &partition)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		if err != nil {
			return err
		}
		var rowID int64
		var skipped, waiting bool
		if err := q.q.QueryRow(ctx, childSlotSQL, job, s).Scan(&rowID, &skipped, &waiting); err != nil {
			return err
		}
		if rowID != 0 && !skipped {
			continue // the slot was run meanwhile (the job's own schedule names it too)
		}
		if err := q.queueChildSlot(ctx, job, partition, s, ids, rowID); err != nil {
			return err
		}
	}
}
