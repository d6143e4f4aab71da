package main

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// insertChaosMembersSQL inserts members $1..$2 of the first seed tenant, each with a plan
// change due today.
const insertChaosMembersSQL = `
WITH today AS (SELECT (now() AT TIME ZONE 'UTC')::date AS d),
plans AS (
    SELECT tenant_id, min(id) AS cur, max(id) AS nxt FROM membership_plans
    WHERE tenant_id = (SELECT min(id) FROM tenants) GROUP BY tenant_id
)
INSERT INTO members (tenant_id, email, status, membership_plan_id, membership_start_date, membership_end_date,
                     pending_membership_plan_id, pending_membership_start_date, pending_membership_end_date,
                     pending_membership_price)
SELECT p.tenant_id, 'chaos-' || i || '@chaos.example', 'ACTIVE', p.cur, today.d - 30, today.d + 30,
       p.nxt, today.d, today.d + 365, 49
FROM generate_series($1::int, $2::int) AS i, today, plans p
ON CONFLICT DO NOTHING`

// insertMembers inserts a few due members every 100 ms until ctx ends. An insert that fails
// (PostgreSQL restarting) is not retried: its members may or may not exist, and the count
// comes from the database at the end.
func (r *runner) insertMembers(ctx context.Context) int64 {
	const perTick = 10
	var n int64
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return n
		case <-tick.C:
		}
		// Not cancelled by the end of the chaos phase: an insert that committed must be counted.
		ictx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		_, err := r.pool.Exec(ictx, insertChaosMembersSQL, n+1, n+perTick)
		cancel()
		if err != nil {
			r.cfg.Log.Info("inserting members failed; going on", "error", err)
		}
		n += perTick
	}
}

// settle waits until a plan-change run that started after the last insert has succeeded,
// and no run is left running under a replaced term. A partition's new holder rescues such a
// run as its term starts; when the chaos ends during a hand-over (a rebalance after the
// last strike), the check must not count a run whose rescue is a moment away. A run still
// stuck when the settle time is up is counted.
func (r *runner) settle(ctx context.Context) bool {
	var after time.Time
	if err := r.pool.QueryRow(ctx, `SELECT now()`).Scan(&after); err != nil {
		return false
	}
	deadline := time.Now().Add(r.cfg.Settle)
	for time.Now().Before(deadline) {
		var ok bool // errors while PostgreSQL comes back are retried
		err := r.pool.QueryRow(ctx, `
SELECT EXISTS (SELECT 1 FROM job_runs
               WHERE job = 'plan-change' AND status = 'succeeded' AND started_at > $1)
   AND NOT EXISTS (SELECT 1 FROM job_runs r WHERE `+stuckRunning+`)`, after).Scan(&ok)
		if err == nil && ok {
			return true
		}
		select {
		case <-ctx.Done():
			return false
		case <-time.After(100 * time.Millisecond):
		}
	}
	return false
}

// stuckRunning is a run of job_runs r still running under a term that was replaced, or for
// more than 10 s.
const stuckRunning = `status = 'running'
       AND (epoch < coalesce((SELECT p.epoch FROM scheduler_partitions p WHERE p.partition_id = r.partition_id),
                             (SELECT epoch FROM scheduler_leader))
            OR started_at < now() - interval '10 seconds')`

// check counts the invariants' violations in the database.
func (r *runner) check(ctx context.Context, res *Result) error {
	const q = `
WITH today AS (SELECT (now() AT TIME ZONE 'UTC')::date AS d),
pc AS (SELECT min(scheduled_at) AS lo, max(scheduled_at) AS hi FROM job_runs
       WHERE job = 'plan-change' AND scheduled_at IS NOT NULL)
SELECT
    (SELECT count(*) FROM (
        SELECT 1 FROM member_plan_change_history
        GROUP BY member_id, effective_date, change_type HAVING count(*) > 1) d),
    (SELECT count(*) FROM members, today
     WHERE pending_membership_plan_id IS NOT NULL AND pending_membership_start_date <= today.d),
    (SELECT count(*) FROM members m
     WHERE m.email LIKE 'chaos-%' AND m.pending_membership_plan_id IS NULL
       AND NOT EXISTS (SELECT 1 FROM member_plan_change_history h
                       WHERE h.member_id = m.id AND h.change_type = 'APPLIED')),
    (SELECT count(*) FROM member_plan_change_history h JOIN members m ON m.id = h.member_id
     WHERE h.change_type = 'APPLIED' AND m.pending_membership_plan_id IS NOT NULL
       AND m.pending_membership_start_date = h.effective_date),
    (SELECT count(*) FROM (
        SELECT 1 FROM job_runs WHERE scheduled_at IS NOT NULL
        GROUP BY job, scheduled_at HAVING count(*) > 1) s),
    (SELECT count(*) FROM job_runs r WHERE ` + stuckRunning + `),
    -- guarantee 10 for an @every 1s job: every slot from the first to the last has a row
    (SELECT count(*) FROM pc, generate_series(pc.lo, pc.hi, interval '1 second') AS g (slot)
     WHERE NOT EXISTS (SELECT 1 FROM job_runs r WHERE r.job = 'plan-change' AND r.scheduled_at = g.slot)),
    -- an abandoned run is re-run by its recovery, or by a later run of the job that succeeded
    (SELECT count(*) FROM job_runs a
     WHERE a.status = 'abandoned'
       AND NOT EXISTS (SELECT 1 FROM job_runs q WHERE q.recovers_run_id = a.id)
       AND NOT EXISTS (SELECT 1 FROM job_runs q WHERE q.job = a.job AND q.status = 'succeeded'
                       AND q.started_at > a.finished_at)),
    (SELECT count(*) FROM member_plan_change_history WHERE change_type = 'APPLIED'),
    (SELECT count(*) FROM members WHERE email LIKE 'chaos-%'),
    (SELECT epoch FROM scheduler_leader),
    current_setting('track_commit_timestamp')::bool`
	err := r.pool.QueryRow(ctx, q).Scan(&res.DuplicateHistory, &res.DueNotApplied, &res.AppliedWithoutHistory,
		&res.HistoryNotApplied, &res.SlotsClaimedTwice, &res.StuckRunning, &res.LostSlots, &res.UnrecoveredAbandoned,
		&res.MembersApplied, &res.MembersInserted, &res.Epoch, &res.CommitOrderChecked)
	if err != nil {
		return fmt.Errorf("check invariants: %w", err)
	}
	if res.StuckRunning > 0 {
		r.logStuckRuns(ctx)
	}
	if res.CommitOrderChecked {
		if res.OldEpochCommits, err = r.oldEpochCommits(ctx); err != nil {
			return err
		}
	}
	rows, err := r.pool.Query(ctx, `SELECT status, count(*) FROM job_runs GROUP BY status ORDER BY status`)
	if err != nil {
		return err
	}
	res.RunsByStatus = map[string]int64{}
	var status string
	var n int64
	_, err = pgx.ForEachRow(rows, []any{&status, &n}, func() error {
		res.RunsByStatus[status] = n
		return nil
	})
	return err
}

// oldEpochCommits counts the rows a run wrote (its job_runs row, its history rows) that
// committed, by the server's commit timestamp, at or after the since of the first epoch
// seen after the run's (docs/design.md guarantee 8). A run that the next leader marked abandoned
// was last written by that leader, so it is left out. Epochs the watcher missed make the
// check laxer, never wrong.
func (r *runner) oldEpochCommits(ctx context.Context) (int64, error) {
	const q = `
WITH seen AS (SELECT * FROM unnest($1::int[], $2::bigint[], $3::timestamptz[]) AS s (partition_id, epoch, since)),
next AS (
    SELECT e.partition_id, e.epoch, min(s.since) AS since
    FROM (SELECT DISTINCT partition_id, epoch FROM job_runs WHERE epoch IS NOT NULL) e
    JOIN seen s ON s.partition_id = e.partition_id AND s.epoch > e.epoch
    GROUP BY e.partition_id, e.epoch)
SELECT
    (SELECT count(*) FROM job_runs r JOIN next n USING (partition_id, epoch)
     WHERE r.status <> 'abandoned' AND pg_xact_commit_timestamp(r.xmin) >= n.since)
  + (SELECT count(*) FROM member_plan_change_history h JOIN job_runs r ON r.id = h.run_id JOIN next n USING (partition_id, epoch)
     WHERE pg_xact_commit_timestamp(h.xmin) >= n.since)`
	r.epochsMu.Lock()
	var partitions []int32
	var epochs []int64
	var sinces []time.Time
	for k, s := range r.epochs {
		partitions = append(partitions, int32(k.partition))
		epochs = append(epochs, k.epoch)
		sinces = append(sinces, s)
	}
	r.epochsMu.Unlock()
	var n int64
	if err := r.pool.QueryRow(ctx, q, partitions, epochs, sinces).Scan(&n); err != nil {
		return 0, fmt.Errorf("check commit order: %w", err)
	}
	return n, nil
}

// logStuckRuns logs each run stuck in running, with its term and replica, for the report:
// the replicas' logs go with the run's work directory.
func (r *runner) logStuckRuns(ctx context.Context) {
	rows, err := r.pool.Query(ctx, `
SELECT r.id, r.job, r.partition_id, r.epoch, coalesce(r.instance_id, ''), r.started_at
FROM job_runs r WHERE `+stuckRunning)
	if err != nil {
		r.cfg.Log.Warn("listing the runs stuck in running failed", "error", err)
		return
	}
	var id, epoch int64
	var partition int
	var job, instance string
	var started time.Time
	_, err = pgx.ForEachRow(rows, []any{&id, &job, &partition, &epoch, &instance, &started}, func() error {
		r.cfg.Log.Warn("run stuck in running", "run_id", id, "job", job, "partition", partition, "epoch", epoch,
			"instance", instance, "started_at", started)
		return nil
	})
	if err != nil {
		r.cfg.Log.Warn("listing the runs stuck in running failed", "error", err)
	}
}
