package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Claims in bulk: the slots that come due at one instant (a thousand jobs on "0 * * * *")
// are claimed in one fenced transaction of four statements, whatever their number, rather
// than in a transaction each. The outcome of every claim is the one ClaimSlot would give.

// claimSlotsSQL claims, in one statement, every slot that is due by the database's clock,
// has no row, and whose job is not paused, has fewer active runs than its bound (overlap.go),
// did not start one within its minimum gap and has runs left of its max_runs: the common case at the top of an hour,
// where every claim wins. It has no ON CONFLICT clause, whose speculative insertion costs a
// third more at 10 000 rows: the conditions exclude the rows the unique indexes would
// refuse, and a row written by another transaction meanwhile (a manual run queued through
// the API) fails the statement, inside a savepoint, and the batch is claimed again with
// claimSlotsSafeSQL. The claims it leaves are decided by slotStateSQL.
//
// job_runs has a partition a day, so each test must not probe every day for every claim:
// a slot's row lies in its day (its id's range; an id from before migration 0013 is below
// every day's), which prunes the slot test to that day and job_runs_kept; the active runs
// are counted once, from each day's small partial index, into a hashed join: the claim's
// partition's only ($11), where every active run of its jobs is. Under the partition's
// activeRunsLock no other transaction adds an active run meanwhile.
const claimSlotsSQL = `
WITH active AS MATERIALIZED (SELECT job, count(*) AS n FROM job_runs
                             WHERE status IN ('queued', 'running') AND partition_id = $11 GROUP BY job)
INSERT INTO job_runs (id, job, trigger, status, scheduled_at, started_at, instance_id, epoch, definition_version, partition_id)
SELECT job_run_id(c.slot), c.job, c.trigger, 'running', c.slot, greatest(coalesce($10::timestamptz, now()), c.slot), $7, $8, c.version, $11
FROM unnest($1::text[], $2::text[], $3::timestamptz[], $4::bigint[], $5::bigint[], $6::bigint[], $9::bigint[])
     AS c (job, trigger, slot, version, min_gap, max_runs, ahead)
LEFT JOIN job_settings s ON s.job = c.job
LEFT JOIN active a ON a.job = c.job
LEFT JOIN job_definitions d ON d.name = c.job
WHERE c.slot <= coalesce($10::timestamptz, now()) + c.ahead * interval '1 microsecond'
  AND NOT coalesce(s.paused, false)
  AND NOT EXISTS (SELECT 1 FROM job_runs r
                  WHERE r.job = c.job AND r.scheduled_at = c.slot
                    AND r.id >= CASE WHEN c.slot < job_run_cutover() THEN 0 ELSE job_run_day_start(job_run_day(c.slot)) END
                    AND r.id < job_run_day_start(job_run_day(c.slot) + 1))
  AND coalesce(a.n, 0) < coalesce(d.max_concurrent, 1)` + minGapTest + maxRunsTest + `
RETURNING ` + runColumns

// minGapTest is claimSlotsSQL's test of the minimum gap. Planned over every day partition
// while executed for few jobs, it is left out of the statement for a batch whose jobs have
// no minimum gap (claimSQL).
const minGapTest = `
  AND NOT (c.min_gap > 0 AND EXISTS (
      SELECT 1 FROM job_runs r
      WHERE r.job = c.job AND r.started_at > coalesce($10::timestamptz, now()) - c.min_gap * interval '1 microsecond'))`

// claimSQL is claimSlotsSQL for a batch (safe: with ON CONFLICT DO NOTHING), without the
// minimum gap's test when no job of the batch has one, nor max_runs' when none has one.
func claimSQL(gaps, maxRuns []int64, safe bool) string {
	sql := claimSlotsSQL
	if safe {
		sql = claimSlotsSafeSQL
	}
	positive := func(v int64) bool { return v > 0 }
	if !slices.ContainsFunc(gaps, positive) {
		sql = strings.Replace(sql, minGapTest, "", 1)
	}
	if !slices.ContainsFunc(maxRuns, positive) {
		sql = strings.Replace(sql, maxRunsTest, "", 1)
	}
	return sql
}

// claimSettings are ClaimSlots' planner settings. The planner's estimate of the subqueries
// makes PostgreSQL compile the statement with JIT, which costs more than the statement at
// these sizes. And it reads the active runs with a bitmap scan, which leaves the index
// entries of every run finished since the last vacuum to be visited again by each claim
// (10 000 more a minute at 10 000 jobs): an index-only scan marks them dead the first time
// (12 ms for 100 000 of them, 1 ms on the next read).
//
// And it plans the claim for its arrays each time (forceCustomPlan).
const claimSettings = `SET LOCAL jit = off; SET LOCAL enable_bitmapscan = off; ` + forceCustomPlan

// claimSlotsSafeSQL is claimSlotsSQL with ON CONFLICT DO NOTHING (without a target: the
// slot's unique index), for a batch that met a row written meanwhile.
var claimSlotsSafeSQL = strings.Replace(claimSlotsSQL, "\nRETURNING ", "\nON CONFLICT DO NOTHING\nRETURNING ", 1)

// slotStateSQL reads, for the claims claimSlotsSQL left, what ClaimSlot checks one by one:
// how far the slot lies ahead of the database's clock, whether it has a row, whether the job
// is paused, has its bound of active runs, started one within its minimum gap, or ran its
// max_runs.
// Each test is an index probe per claim.
const slotStateSQL = `
SELECT c.i,
       greatest(c.slot - coalesce($6::timestamptz, now()), interval '0'),
       EXISTS (SELECT 1 FROM job_runs r WHERE r.job = c.job AND r.scheduled_at = c.slot),
       coalesce(s.paused, false),
       (SELECT count(*) FROM job_runs r WHERE r.job = c.job AND r.status IN ('queued', 'running')) >= job_run_bound(c.job),
       c.min_gap > 0 AND EXISTS (
           SELECT 1 FROM job_runs r
           WHERE r.job = c.job AND r.started_at > coalesce($6::timestamptz, now()) - c.min_gap * interval '1 microsecond'),
       c.max_runs > 0 AND (SELECT count(*) FROM job_runs r WHERE r.job = c.job AND ` + ranPredicate + `) >= c.max_runs
FROM unnest($1::text[], $2::timestamptz[], $3::bigint[], $4::int[], $5::bigint[]) AS c (job, slot, min_gap, i, max_runs)
LEFT JOIN job_settings s ON s.job = c.job
ORDER BY c.i`

// skipSlotsSQL records the skipped slots.
const skipSlotsSQL = `
INSERT INTO job_runs (id, job, trigger, status, scheduled_at, finished_at, instance_id, epoch, reason, partition_id)
SELECT job_run_id(c.slot), c.job, c.trigger, 'skipped', c.slot, coalesce($7::timestamptz, now()), $5, $6, c.reason, $8
FROM unnest($1::text[], $2::text[], $3::timestamptz[], $4::text[]) AS c (job, trigger, slot, reason)
ON CONFLICT DO NOTHING
RETURNING id, job, scheduled_at`

// ClaimSlots claims every slot of claims inside the caller's fenced transaction and returns
// their outcomes, in order, as ClaimSlot would (docs/design.md guarantees 2 and 4). Claims
// share one instance id. When every claim wins it costs one statement.
//
// Its steps: insertWinners claims each job's earliest slot at once; for the claims left,
// slotStates reads why each did not win, decideSlot turns that into an outcome, a skip to
// record or a retry, and recordSkips writes the skipped rows; a claim whose state changed
// under it is decided again alone, by ClaimSlot.
func (tx *Tx) ClaimSlots(ctx context.Context, claims []Claim) ([]ClaimOutcome, error) {
	out := make([]ClaimOutcome, len(claims))
	if len(claims) == 0 {
		return out, nil
	}
	won, err := tx.insertWinners(ctx, claims)
	if err != nil {
		return nil, fmt.Errorf("claim %d slots: %w", len(claims), err)
	}
	for i, run := range won {
		out[i] = ClaimOutcome{Run: run}
	}
	stillAhead, err := tx.settleAhead(ctx, claims, out)
	if err != nil {
		return nil, err
	}
	if len(won)+stillAhead == len(claims) {
		return out, nil
	}

	var left []int
	for i := range claims {
		if out[i].Run == nil && out[i].Early == 0 {
			left = append(left, i)
		}
	}
	states, err := tx.slotStates(ctx, claims, left)
	if err != nil {
		return nil, fmt.Errorf("read the state of %d slots: %w", len(left), err)
	}
	var skips []slotSkip
	var retry []int
	for _, st := range states {
		switch outcome, reason, again := decideSlot(claims[st.i], st); {
		case reason != "":
			skips = append(skips, slotSkip{st.i, reason})
		case again:
			retry = append(retry, st.i)
		default:
			out[st.i] = outcome
		}
	}
	if len(skips) > 0 {
		ids, err := tx.recordSkips(ctx, claims, skips)
		if err != nil {
			return nil, fmt.Errorf("record %d skipped slots: %w", len(skips), err)
		}
		for _, s := range skips {
			if id, ok := ids[s.i]; ok {
				out[s.i] = ClaimOutcome{Skipped: s.reason, SkippedID: id}
			} else {
				retry = append(retry, s.i) // its skipped row met a conflict
			}
		}
	}
	for _, i := range retry {
		if out[i], err = tx.ClaimSlot(ctx, claims[i]); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// settleAhead completes the outcomes of the Ahead claims, by the database's clock at the
// end of the claim: a won one's StartIn, and Early for one that did not win while its slot
// is still to come (it records nothing; a slot that has come by now is decided as any
// other). It returns how many claims it made Early.
func (tx *Tx) settleAhead(ctx context.Context, claims []Claim, out []ClaimOutcome) (early int, err error) {
	if !slices.ContainsFunc(claims, func(c Claim) bool { return c.Ahead > 0 }) {
		return 0, nil
	}
	var now time.Time
	if err := tx.QueryRow(ctx, `SELECT coalesce($1::timestamptz, clock_timestamp())`, claims[0].Now).Scan(&now); err != nil {
		return 0, fmt.Errorf("read the database's clock after an early claim: %w", err)
	}
	for i, c := range claims {
		ahead := c.ScheduledAt.Sub(now)
		switch {
		case c.Ahead <= 0:
		case out[i].Run != nil:
			out[i].ClaimedAhead, out[i].StartIn = true, ahead
		case ahead <= 0:
		default:
			out[i].Early = ahead
			early++
		}
	}
	return early, nil
}

// insertWinners claims, in one statement, the earliest slot of each job of claims and returns
// the runs it wrote by claim position. A later slot of the same job in the batch would meet
// that run, so it is left for slotStates with the claims that did not win.
func (tx *Tx) insertWinners(ctx context.Context, claims []Claim) (map[int]*Run, error) {
	earliest := map[string]int{} // job → position of its earliest slot
	for i, c := range claims {
		if j, ok := earliest[c.Job]; !ok || c.ScheduledAt.Before(claims[j].ScheduledAt) {
			earliest[c.Job] = i
		}
	}
	var jobs, triggers []string
	var slots []time.Time
	var versions []*int64
	var gaps, maxRuns, ahead []int64
	for i, c := range claims {
		if earliest[c.Job] == i {
			jobs, triggers, slots = append(jobs, c.Job), append(triggers, c.Trigger), append(slots, c.ScheduledAt)
			versions, gaps = append(versions, c.DefinitionVersion), append(gaps, c.MinGap.Microseconds())
			maxRuns, ahead = append(maxRuns, int64(c.MaxRuns)), append(ahead, c.Ahead.Microseconds())
		}
	}
	if _, err := tx.Exec(ctx, claimSettings); err != nil {
		return nil, err
	}
	if err := tx.lockActiveRuns(ctx); err != nil {
		return nil, err
	}
	args := []any{jobs, triggers, slots, versions, gaps, maxRuns, claims[0].InstanceID, tx.epoch, ahead, claims[0].Now, tx.partition}
	runs, err := claimWinners(ctx, tx, claimSQL(gaps, maxRuns, false), args)
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "23505" { // unique_violation
		runs, err = claimWinners(ctx, tx, claimSQL(gaps, maxRuns, true), args)
	}
	if err != nil {
		return nil, err
	}
	won := make(map[int]*Run, len(runs))
	for _, r := range runs {
		won[earliest[r.Job]] = r
	}
	return won, nil
}

// claimWinners runs a claim statement in a savepoint, so that a unique violation leaves the
// transaction usable, and returns the runs it wrote, whole.
func claimWinners(ctx context.Context, tx *Tx, sql string, args []any) ([]*Run, error) {
	sp, err := tx.Begin(ctx)
	if err != nil {
		return nil, err
	}
	rows, err := sp.Query(ctx, sql, args...)
	if err != nil {
		_ = sp.Rollback(ctx)
		return nil, err
	}
	runs, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (*Run, error) { return scanRun(row) })
	if err != nil {
		_ = sp.Rollback(ctx)
		return nil, err
	}
	return runs, sp.Commit(ctx)
}

// slotState is what slotStateSQL read about the claim at position i.
type slotState struct {
	i                                   int
	ahead                               time.Duration
	taken, paused, busy, tooSoon, spent bool
}

// slotStates reads the state of the claims at positions left, in order.
func (tx *Tx) slotStates(ctx context.Context, claims []Claim, left []int) ([]slotState, error) {
	jobs := make([]string, len(left))
	slots := make([]time.Time, len(left))
	gaps := make([]int64, len(left))
	index := make([]int32, len(left))
	maxRuns := make([]int64, len(left))
	for k, i := range left {
		jobs[k], slots[k], gaps[k], index[k] = claims[i].Job, claims[i].ScheduledAt, claims[i].MinGap.Microseconds(), int32(i)
		maxRuns[k] = int64(claims[i].MaxRuns)
	}
	rows, err := tx.Query(ctx, slotStateSQL, jobs, slots, gaps, index, maxRuns, claims[0].Now)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (slotState, error) {
		var s slotState
		err := row.Scan(&s.i, &s.ahead, &s.taken, &s.paused, &s.busy, &s.tooSoon, &s.spent)
		return s, err
	})
}

// decideSlot is ClaimSlot's decision for a claim that did not win, from its state: an
// outcome that records nothing (Early, Taken, Finished, Busy), or the reason of a skipped
// row to record; again, for ClaimSlot to decide alone, when the slot is free now (its state
// changed since the insert) or a Replace claim has runs to replace. A job that ran its
// max_runs records nothing more, not even a skip.
func decideSlot(c Claim, st slotState) (out ClaimOutcome, reason string, again bool) {
	switch {
	case st.ahead > 0:
		return ClaimOutcome{Early: st.ahead}, "", false
	case st.taken:
		return ClaimOutcome{Taken: true}, "", false
	case st.spent:
		return ClaimOutcome{Finished: true}, "", false
	case st.paused:
		return ClaimOutcome{}, ReasonPaused, false
	case st.busy && c.Replace:
		return ClaimOutcome{}, "", true
	case st.busy && c.QueueOne:
		return ClaimOutcome{Busy: true}, "", false
	case st.busy:
		return ClaimOutcome{}, ReasonOverlap, false
	case st.tooSoon:
		return ClaimOutcome{}, ReasonMinGap, false
	}
	return ClaimOutcome{}, "", true
}

// slotSkip is a skipped row to record for the claim at position i.
type slotSkip struct {
	i      int
	reason string
}

// recordSkips writes the skipped rows of skips in one statement and returns their ids by
// claim position; a skip missing from them met a row written meanwhile.
func (tx *Tx) recordSkips(ctx context.Context, claims []Claim, skips []slotSkip) (map[int]int64, error) {
	type slotKey struct {
		job  string
		slot int64
	}
	at := make(map[slotKey]int, len(skips)) // (job, slot) → claim position
	jobs := make([]string, len(skips))
	triggers := make([]string, len(skips))
	slots := make([]time.Time, len(skips))
	reasons := make([]string, len(skips))
	for k, s := range skips {
		c := claims[s.i]
		jobs[k], triggers[k], slots[k], reasons[k] = c.Job, c.Trigger, c.ScheduledAt, s.reason
		at[slotKey{c.Job, c.ScheduledAt.Unix()}] = s.i
	}
	rows, err := tx.Query(ctx, skipSlotsSQL, jobs, triggers, slots, reasons, claims[0].InstanceID, tx.epoch, claims[0].Now, tx.partition)
	if err != nil {
		return nil, err
	}
	ids := make(map[int]int64, len(skips))
	var id int64
	var job string
	var slot time.Time
	_, err = pgx.ForEachRow(rows, []any{&id, &job, &slot}, func() error {
		ids[at[slotKey{job, slot.Unix()}]] = id
		return nil
	})
	return ids, err
}
