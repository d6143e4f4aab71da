package store

import (
	"context"
	"fmt"
	"time"
)

// max_runs: a runtime job's schedule ends once this many of its slots ran. A slot "ran" when
// its own run (rerun 0: the one the timers or the catch-up claimed) started: it is running,
// or ended succeeded, failed, timed_out, abandoned, or cancelled after it started. Skipped and
// missed slots never ran; manual and recovery runs have no slot (a recovery redoes a slot
// already counted), and a re-run or a backfill does a slot again on an operator's request,
// as a manual run does a job: none of them counts.

// ranPredicate selects, in job_runs r, the rows of slots that ran.
const ranPredicate = `r.scheduled_at IS NOT NULL AND r.rerun = 0
                    AND (r.status IN ('queued', 'running', 'succeeded', 'failed', 'timed_out', 'abandoned')
                         OR (r.status = 'cancelled' AND r.started_at IS NOT NULL))`

// maxRunsTest is claimSlotsSQL's test of max_runs, left out of a batch whose jobs have none.
// The count is read under activeRunsLock, which every claim takes first: two claims of a
// job's last run, on one leader or two racing ones, see each other's commit.
const maxRunsTest = `
  AND NOT (c.max_runs > 0 AND (SELECT count(*) FROM job_runs r WHERE r.job = c.job AND ` + ranPredicate + `) >= c.max_runs)`

// spentSQL is ClaimSlot's test: whether the job's slots that ran reached $2.
const spentSQL = `SELECT $2::bigint > 0 AND (SELECT count(*) FROM job_runs r WHERE r.job = $1 AND ` + ranPredicate + `) >= $2`

// RanRuns is how many of a job's slots ran, and the latest of them.
type RanRuns struct {
	Count int64
	Last  time.Time
}

// RanRuns returns, of the jobs named, how many slots ran and the latest, by job (a job none
// of whose slots ran is left out): what a job view needs to show a job with max_runs finished.
func (q queries) RanRuns(ctx context.Context, jobs []string) (map[string]RanRuns, error) {
	rows, err := q.q.Query(ctx, `SELECT r.job, count(*), max(r.scheduled_at) FROM job_runs r
		WHERE r.job = ANY($1) AND `+ranPredicate+` GROUP BY r.job`, jobs)
	if err != nil {
		return nil, fmt.Errorf("count the runs that ran: %w", err)
	}
	defer rows.Close()
	out := make(map[string]RanRuns)
	for rows.Next() {
		var job string
		var r RanRuns
		if err := rows.Scan(&job, &r.Count, &r.Last); err != nil {
			return nil, fmt.Errorf("count the runs that ran: %w", err)
		}
		out[job] = r
	}
	return out, rows.Err()
}
