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
// has no row, and whose job is not paused, has no active run and did not start one within
// its minimum gap: the common case at the top of an hour, where every claim wins. It has no
// ON CONFLICT clause, whose speculative insertion costs a third more at 10 000 rows: the
// conditions exclude the rows the unique indexes would refuse, and a row written by another
// transaction meanwhile (a manual run queued through the API) fails the statement, inside a
// savepoint, and the batch is claimed again with claimSlotsSafeSQL. The claims it leaves
// are decided by slotStateSQL.
//
// job_runs has a partition a day, so each test must not probe every day for every claim:
// a slot's row lies in its day (its id's range; an id from before migration 0013 is below
// every day's), which prunes the slot test to that day and job_runs_kept; the active runs
// are read once, from each day's small partial index, into a hashed anti-join. Under
// activeRunsLock no other transaction adds an active run meanwhile.
const claimSlotsSQL = `
WITH active AS MATERIALIZED (SELECT job FROM job_runs WHERE status IN ('queued', 'running'))
INSERT INTO job_runs (id, job, trigger, status, scheduled_at, started_at, instance_id, epoch, definition_version)
SELECT job_run_id(c.slot), c.job, c.trigger, 'running', c.slot, now(), $6, $7, c.version
FROM unnest($1::text[], $2::text[], $3::timestamptz[], $4::bigint[], $5::bigint[])
     AS c (job, trigger, slot, version, min_gap)
LEFT JOIN job_settings s ON s.job = c.job
WHERE c.slot <= now()
  AND NOT coalesce(s.paused, false)
  AND NOT EXISTS (SELECT 1 FROM job_runs r
                  WHERE r.job = c.job AND r.scheduled_at = c.slot
                    AND r.id >= CASE WHEN c.slot < job_run_cutover() THEN 0 ELSE job_run_day_start(job_run_day(c.slot)) END
                    AND r.id < job_run_day_start(job_run_day(c.slot) + 1))
  AND c.job NOT IN (SELECT job FROM active)` + minGapTest + `
RETURNING id, job, created_at, started_at`

// minGapTest is claimSlotsSQL's test of the minimum gap. Planned over every day partition
// while executed for few jobs, it is left out of the statement for a batch whose jobs have
// no minimum gap (claimSQL).
const minGapTest = `
  AND NOT (c.min_gap > 0 AND EXISTS (
      SELECT 1 FROM job_runs r
      WHERE r.job = c.job AND r.started_at > now() - c.min_gap * interval '1 microsecond'))`

// claimSQL is claimSlotsSQL for a batch (safe: with ON CONFLICT DO NOTHING), without the
// minimum gap's test when no job of the batch has one.
func claimSQL(gaps []int64, safe bool) string {
	sql := claimSlotsSQL
	if safe {
		sql = claimSlotsSafeSQL
	}
	if slices.ContainsFunc(gaps, func(g int64) bool { return g > 0 }) {
		return sql
	}
	return strings.Replace(sql, minGapTest, "", 1)
}

// claimSettings are ClaimSlots' planner settings. The planner's estimate of the subqueries
// makes PostgreSQL compile the statement with JIT, which costs more than the statement at
// these sizes. And it reads the active runs with a bitmap scan, which leaves the index
// entries of every run finished since the last vacuum to be visited again by each claim
// (10 000 more a minute at 10 000 jobs): an index-only scan marks them dead the first time
// (12 ms for 100 000 of them, 1 ms on the next read).
const claimSettings = `SET LOCAL jit = off; SET LOCAL enable_bitmapscan = off`

// claimSlotsSafeSQL is claimSlotsSQL with ON CONFLICT DO NOTHING (without a target: both
// unique indexes), for a batch that met a row written meanwhile.
var claimSlotsSafeSQL = strings.Replace(claimSlotsSQL, "\nRETURNING ", "\nON CONFLICT DO NOTHING\nRETURNING ", 1)

// slotStateSQL reads, for the claims claimSlotsSQL left, what ClaimSlot checks one by one:
// how far the slot lies ahead of the database's clock, whether it has a row, whether the job
// is paused, has an active run, or started one within its minimum gap. Each test is an index
// probe per claim.
const slotStateSQL = `
SELECT c.i,
       greatest(c.slot - now(), interval '0'),
       EXISTS (SELECT 1 FROM job_runs r WHERE r.job = c.job AND r.scheduled_at = c.slot),
       coalesce(s.paused, false),
       EXISTS (SELECT 1 FROM job_runs r WHERE r.job = c.job AND r.status IN ('queued', 'running')),
       c.min_gap > 0 AND EXISTS (
           SELECT 1 FROM job_runs r
           WHERE r.job = c.job AND r.started_at > now() - c.min_gap * interval '1 microsecond')
FROM unnest($1::text[], $2::timestamptz[], $3::bigint[], $4::int[]) AS c (job, slot, min_gap, i)
LEFT JOIN job_settings s ON s.job = c.job
ORDER BY c.i`

// skipSlotsSQL records the skipped slots.
const skipSlotsSQL = `
INSERT INTO job_runs (id, job, trigger, status, scheduled_at, finished_at, instance_id, epoch, reason)
SELECT job_run_id(c.slot), c.job, c.trigger, 'skipped', c.slot, now(), $5, $6, c.reason
FROM unnest($1::text[], $2::text[], $3::timestamptz[], $4::text[]) AS c (job, trigger, slot, reason)
ON CONFLICT DO NOTHING
RETURNING id, job, scheduled_at`

// ClaimSlots claims every slot of claims inside the caller's fenced transaction and returns
// their outcomes, in order, as ClaimSlot would (docs/design.md guarantees 2 and 4). Claims
// share one instance id. When every claim wins it costs one statement.
func (tx *Tx) ClaimSlots(ctx context.Context, claims []Claim) ([]ClaimOutcome, error) {
	out := make([]ClaimOutcome, len(claims))
	if len(claims) == 0 {
		return out, nil
	}
	instanceID := claims[0].InstanceID
	// One claim per job goes into the statement, its earliest slot: a later slot of the
	// same job in the batch meets that run and is decided with the rest below.
	earliest := map[string]int{}
	for i, c := range claims {
		if j, ok := earliest[c.Job]; !ok || c.ScheduledAt.Before(claims[j].ScheduledAt) {
			earliest[c.Job] = i
		}
	}
	var all claimBatch
	var gaps []int64
	for i, c := range claims {
		if earliest[c.Job] == i {
			all.add(i, c, "")
			gaps = append(gaps, c.MinGap.Microseconds())
		}
	}
	if _, err := tx.Exec(ctx, claimSettings); err != nil {
		return nil, fmt.Errorf("claim %d slots: %w", len(claims), err)
	}
	if err := lockActiveRuns(ctx, tx); err != nil {
		return nil, fmt.Errorf("claim %d slots: %w", len(claims), err)
	}
	args := []any{all.jobs, all.triggers, all.slots, all.versions, gaps, instanceID, tx.epoch}
	won, err := claimWinners(ctx, tx, claimSQL(gaps, false), args)
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "23505" { // unique_violation
		won, err = claimWinners(ctx, tx, claimSQL(gaps, true), args)
	}
	if err != nil {
		return nil, fmt.Errorf("claim %d slots: %w", len(claims), err)
	}
	for _, w := range won {
		i := earliest[w.job]
		c := claims[i]
		slot, epoch, instance := c.ScheduledAt, tx.epoch, instanceID
		// The row as claimSlotsSQL wrote it: the columns the statement did not return are
		// the claim's own, or their defaults.
		out[i] = ClaimOutcome{Run: &Run{ID: w.id, Job: c.Job, Trigger: c.Trigger, Status: StatusRunning,
			ScheduledAt: &slot, CreatedAt: w.created, StartedAt: &w.started, InstanceID: &instance, Epoch: &epoch,
			Stats: []byte(`{}`), Params: []byte(`{}`), DefinitionVersion: c.DefinitionVersion}}
	}
	if len(won) == len(claims) {
		return out, nil
	}

	// The rest: why each did not win.
	var left claimBatch
	var leftGaps []int64
	var leftIndex []int32
	for i, c := range claims {
		if out[i].Run == nil {
			left.add(i, c, "")
			leftGaps = append(leftGaps, c.MinGap.Microseconds())
			leftIndex = append(leftIndex, int32(i))
		}
	}
	rows, err := tx.Query(ctx, slotStateSQL, left.jobs, left.slots, leftGaps, leftIndex)
	if err != nil {
		return nil, fmt.Errorf("read the state of %d slots: %w", len(left.index), err)
	}
	var skip claimBatch
	var retry []int
	for rows.Next() {
		var i int
		var ahead time.Duration
		var taken, paused, active, tooSoon bool
		if err := rows.Scan(&i, &ahead, &taken, &paused, &active, &tooSoon); err != nil {
			rows.Close()
			return nil, fmt.Errorf("read the state of %d slots: %w", len(left.index), err)
		}
		c := claims[i]
		switch {
		case ahead > 0:
			out[i] = ClaimOutcome{Early: ahead}
		case taken:
			out[i] = ClaimOutcome{Taken: true}
		case paused:
			skip.add(i, c, ReasonPaused)
		case active && c.QueueOne:
			out[i] = ClaimOutcome{Busy: true}
		case active:
			skip.add(i, c, ReasonOverlap)
		case tooSoon:
			skip.add(i, c, ReasonMinGap)
		default:
			retry = append(retry, i) // free now: the state changed since the insert
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read the state of %d slots: %w", len(left.index), err)
	}
	if len(skip.index) > 0 {
		rows, err := tx.Query(ctx, skipSlotsSQL, skip.jobs, skip.triggers, skip.slots, skip.reasons, instanceID, tx.epoch)
		if err != nil {
			return nil, fmt.Errorf("record %d skipped slots: %w", len(skip.index), err)
		}
		for rows.Next() {
			var id int64
			var job string
			var slot time.Time
			if err := rows.Scan(&id, &job, &slot); err != nil {
				rows.Close()
				return nil, fmt.Errorf("record %d skipped slots: %w", len(skip.index), err)
			}
			i := skip.at(job, slot)
			out[i] = ClaimOutcome{Skipped: skip.reasons[skip.pos[i]], SkippedID: id}
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, fmt.Errorf("record %d skipped slots: %w", len(skip.index), err)
		}
		for _, i := range skip.index {
			if out[i] == (ClaimOutcome{}) {
				retry = append(retry, i) // its skipped row met a conflict
			}
		}
	}
	// A claim whose state changed under it is decided again alone, as ClaimSlot decides it.
	for _, i := range retry {
		if out[i], err = tx.ClaimSlot(ctx, claims[i]); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// winner is a claim claimSlotsSQL won: what the database added to it.
type winner struct {
	id               int64
	job              string
	created, started time.Time
}

// claimWinners runs a claim statement in a savepoint, so that a unique violation leaves the
// transaction usable.
func claimWinners(ctx context.Context, tx *Tx, sql string, args []any) ([]winner, error) {
	sp, err := tx.Begin(ctx)
	if err != nil {
		return nil, err
	}
	rows, err := sp.Query(ctx, sql, args...)
	if err != nil {
		_ = sp.Rollback(ctx)
		return nil, err
	}
	won, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (winner, error) {
		var w winner
		err := row.Scan(&w.id, &w.job, &w.created, &w.started)
		return w, err
	})
	if err != nil {
		_ = sp.Rollback(ctx)
		return nil, err
	}
	return won, sp.Commit(ctx)
}

// claimBatch gathers the claims of one statement, as the arrays it binds.
type claimBatch struct {
	index    []int           // claim positions, in insert order
	pos      map[int]int     // claim position → index in the arrays
	byKey    map[slotKey]int // (job, slot) → claim position
	jobs     []string
	triggers []string
	slots    []time.Time
	versions []*int64
	reasons  []string
}

type slotKey struct {
	job  string
	slot int64
}

func (b *claimBatch) add(i int, c Claim, reason string) {
	if b.pos == nil {
		b.pos, b.byKey = map[int]int{}, map[slotKey]int{}
	}
	b.pos[i] = len(b.index)
	b.byKey[slotKey{c.Job, c.ScheduledAt.Unix()}] = i
	b.index = append(b.index, i)
	b.jobs = append(b.jobs, c.Job)
	b.triggers = append(b.triggers, c.Trigger)
	b.slots = append(b.slots, c.ScheduledAt)
	b.versions = append(b.versions, c.DefinitionVersion)
	b.reasons = append(b.reasons, reason)
}

// at is the claim position of a returned row.
func (b *claimBatch) at(job string, slot time.Time) int { return b.byKey[slotKey{job, slot.Unix()}] }
