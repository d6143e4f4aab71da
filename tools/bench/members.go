package main

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/schedulerhq/scheduler/internal/seed"
)

// dueMembersSQL inserts members 1..$1 that are all due for both member jobs: a pending plan
// change starting today or up to 2 days ago (plan-change) and an ACTIVE membership that ended
// 1 to 90 days ago (status-sync). seed.Members makes only a tenth of its members due for
// plan-change, so a million due members would need ten million rows; these have the same
// shape (tenants, plans and columns from seed.Members) with every row due.
const dueMembersSQL = `
WITH today AS (SELECT (now() AT TIME ZONE 'UTC')::date AS d),
tenant AS (
    SELECT id, row_number() OVER (ORDER BY id) - 1 AS k
    FROM tenants WHERE name LIKE 'Seed tenant %'
),
plan AS (
    SELECT id, tenant_id, price, duration_days, row_number() OVER (PARTITION BY tenant_id ORDER BY id) - 1 AS k
    FROM membership_plans WHERE tenant_id IN (SELECT id FROM tenant)
)
INSERT INTO members (tenant_id, email, status, membership_plan_id, membership_start_date, membership_end_date,
                     pending_membership_plan_id, pending_membership_start_date, pending_membership_end_date,
                     pending_membership_price)
SELECT t.id, 'due-' || i || '@bench.example', 'ACTIVE',
       cur.id, today.d - 1 - i % 90 - cur.duration_days, today.d - 1 - i % 90,
       nxt.id, today.d - i % 3, today.d - i % 3 + nxt.duration_days, nxt.price
FROM generate_series(1, $1::int) AS i
CROSS JOIN today
JOIN tenant t ON t.k = i % $2::int
JOIN plan cur ON cur.tenant_id = t.id AND cur.k = i % 3
JOIN plan nxt ON nxt.tenant_id = t.id AND nxt.k = (i + 1) % 3
ORDER BY i`

// The single raw statements each job is compared with: the same change for every due member
// at once, without batches, locks, guards or the fence.
const (
	rawPlanChangeSQL = `
WITH due AS (
    SELECT id, membership_plan_id FROM members
    WHERE pending_membership_plan_id IS NOT NULL AND pending_membership_start_date <= $1
),
applied AS (
    UPDATE members m
    SET membership_plan_id = m.pending_membership_plan_id,
        membership_start_date = m.pending_membership_start_date,
        membership_end_date = m.pending_membership_end_date,
        pending_membership_plan_id = NULL, pending_membership_start_date = NULL,
        pending_membership_end_date = NULL, pending_membership_price = NULL,
        updated_at = now()
    FROM due WHERE m.id = due.id
    RETURNING m.id, due.membership_plan_id AS from_plan_id, m.membership_plan_id AS to_plan_id,
              m.membership_start_date AS effective_date
)
INSERT INTO member_plan_change_history (member_id, from_plan_id, to_plan_id, change_type, effective_date, run_id)
SELECT id, from_plan_id, to_plan_id, 'APPLIED', effective_date, 1 FROM applied`

	rawStatusSyncSQL = `
UPDATE members SET status = 'INACTIVE', updated_at = now()
WHERE status = 'ACTIVE' AND membership_end_date < $1`
)

// The naive per-member approach the jobs replace (the seeds' systems): read every due id,
// then for each member take a session advisory lock, change it in its own transaction, and
// unlock.
const (
	naivePlanChangeIDsSQL = `
SELECT id FROM members
WHERE pending_membership_plan_id IS NOT NULL AND pending_membership_start_date <= $1
ORDER BY pending_membership_start_date, id`
	naivePlanChangeUpdateSQL = `
UPDATE members m
SET membership_plan_id = m.pending_membership_plan_id,
    membership_start_date = m.pending_membership_start_date,
    membership_end_date = m.pending_membership_end_date,
    pending_membership_plan_id = NULL, pending_membership_start_date = NULL,
    pending_membership_end_date = NULL, pending_membership_price = NULL,
    updated_at = now()
FROM (SELECT id, membership_plan_id FROM members WHERE id = $1) old
WHERE m.id = old.id AND m.pending_membership_plan_id IS NOT NULL
RETURNING old.membership_plan_id, m.membership_plan_id, m.membership_start_date`
	naivePlanChangeHistorySQL = `
INSERT INTO member_plan_change_history (member_id, from_plan_id, to_plan_id, change_type, effective_date, run_id)
VALUES ($1, $2, $3, 'APPLIED', $4, 1)`

	naiveStatusSyncIDsSQL = `
SELECT id FROM members WHERE status = 'ACTIVE' AND membership_end_date < $1
ORDER BY membership_end_date, id`
	naiveStatusSyncUpdateSQL = `
UPDATE members SET status = 'INACTIVE', updated_at = now()
WHERE id = $1 AND status = 'ACTIVE'`

	naiveLockSQL   = `SELECT pg_try_advisory_lock(hashtextextended($1::text || ':' || $2::bigint::text, 0))`
	naiveUnlockSQL = `SELECT pg_advisory_unlock(hashtextextended($1::text || ':' || $2::bigint::text, 0))`
)

func benchMembers(ctx context.Context, b *bench) error {
	n := b.sz.members
	tmpl, err := b.migratedDB(ctx, "members_tmpl")
	if err != nil {
		return err
	}
	t := time.Now()
	pool, err := pgxpool.New(ctx, b.url(tmpl))
	if err != nil {
		return err
	}
	if _, err := seed.Members(ctx, pool, 0); err != nil { // the seed's tenants and plans
		pool.Close()
		return err
	}
	_, err = pool.Exec(ctx, dueMembersSQL, n, seed.Tenants)
	pool.Close()
	if err != nil {
		return fmt.Errorf("insert %d due members: %w", n, err)
	}
	if err := b.finishTemplate(ctx, tmpl); err != nil {
		return err
	}
	b.log.Info("members data set built", "members", n, "took", time.Since(t).Round(time.Millisecond))

	for _, j := range []struct {
		name, raw, ids, update string
	}{
		{"plan-change", rawPlanChangeSQL, naivePlanChangeIDsSQL, naivePlanChangeUpdateSQL},
		{"status-sync", rawStatusSyncSQL, naiveStatusSyncIDsSQL, naiveStatusSyncUpdateSQL},
	} {
		if err := benchMemberJob(ctx, b, tmpl, j.name, j.raw, j.ids, j.update); err != nil {
			return fmt.Errorf("%s: %w", j.name, err)
		}
	}
	b.dropDB(ctx, tmpl)
	var syncCommit string
	if err := b.admin.QueryRow(ctx, `SELECT current_setting('synchronous_commit')`).Scan(&syncCommit); err == nil && syncCommit == "off" {
		b.report.note("This cluster runs with synchronous_commit=off (scripts/pg.sh's development settings), so a commit costs " +
			"no WAL flush: that flatters the naive per-member loop, which commits once per member, far more than the jobs, " +
			"which commit once per batch of 1000. On a durable setting the job ÷ naive ratios would be lower.")
	}
	b.report.note("Job ÷ raw statement: the jobs' per-row overhead is the keyset read of the batch, the try-lock, " +
		"re-finding each row by primary key for the guarded statement and one fenced transaction per batch. status-sync " +
		"walks members in id order, so a batch rewrites neighbouring rows and each heap page is dirtied once per run, " +
		"as in the single UPDATE; walked by end date, a batch touched about one row per page and every page was " +
		"rewritten batch after batch, which cost more than all the rest (2.20× before the change).")
	return nil
}

func benchMemberJob(ctx context.Context, b *bench, tmpl, job, rawSQL, idsSQL, updateSQL string) error {
	n, sample := b.sz.members, b.sz.naiveSample
	data := fmt.Sprintf("%s members, all due", count(n))
	var jobTimes, rawTimes, naiveTimes []time.Duration
	var maxRSS int64
	var changed int64
	for rep := range b.sz.reps {
		// The job, alone in a child process.
		err := onCopy(ctx, b, tmpl, func(db *pgxpool.Pool, url string) error {
			res, err := runJobChild(ctx, job, url)
			if err != nil {
				return err
			}
			jobTimes = append(jobTimes, res.took)
			maxRSS = max(maxRSS, res.maxRSSKB)
			changed = res.stats.Changed
			return nil
		})
		if err != nil {
			return err
		}
		// The single raw statement.
		err = onCopy(ctx, b, tmpl, func(db *pgxpool.Pool, _ string) error {
			start := time.Now()
			tag, err := db.Exec(ctx, rawSQL, today(ctx, db))
			if err != nil {
				return fmt.Errorf("raw statement: %w", err)
			}
			rawTimes = append(rawTimes, time.Since(start))
			if tag.RowsAffected() != int64(n) {
				return fmt.Errorf("raw statement changed %d rows, want %d", tag.RowsAffected(), n)
			}
			return nil
		})
		if err != nil {
			return err
		}
		// The naive loop on a sample, extrapolated. One repetition in QUICK mode.
		if rep > 0 && b.quick {
			continue
		}
		err = onCopy(ctx, b, tmpl, func(db *pgxpool.Pool, _ string) error {
			d, err := naiveLoop(ctx, db, job, idsSQL, updateSQL, sample, n)
			if err == nil {
				naiveTimes = append(naiveTimes, d)
			}
			return err
		})
		if err != nil {
			return err
		}
	}
	if changed != int64(n) {
		return fmt.Errorf("the job changed %d members, want %d", changed, n)
	}
	jm, rm, nm := median(jobTimes), median(rawTimes), median(naiveTimes)
	b.report.add(row{name: job + " job ÷ one raw SQL statement", data: data,
		value: dur(jm), ref: dur(rm), ratio: fmt.Sprintf("%.2f", ratio(jm, rm)), target: "≤ 1.5",
		pass: verdict(ratio(jm, rm) <= 1.5),
		note: fmt.Sprintf("job body in a child process with a fenced Env (batches of 1000, try-locks, guards); runs: job %s, raw %s", durs(jobTimes), durs(rawTimes))})
	b.report.add(row{name: job + " job ÷ naive per-member loop", data: data,
		value: dur(jm), ref: dur(nm) + " (extrapolated)", ratio: fmt.Sprintf("%.4f", ratio(jm, nm)), target: "≤ 0.05",
		pass: verdict(ratio(jm, nm) <= 0.05),
		note: fmt.Sprintf("naive: select all due ids, then per member try-lock, transaction, update%s, unlock; measured on %s members and extrapolated linearly to %s (runs: %s)",
			map[bool]string{true: ", insert history"}[job == "plan-change"], count(sample), count(n), durs(naiveTimes))})
	b.report.add(row{name: job + ": one raw SQL statement ÷ naive loop", data: data,
		value: dur(rm), ref: dur(nm) + " (extrapolated)", ratio: fmt.Sprintf("%.4f", ratio(rm, nm)),
		note: "context for the row above: no job can beat the single statement, so this ratio bounds what the job ÷ naive ratio can reach on this machine and PostgreSQL settings"})
	b.report.add(row{name: job + " peak RSS of the job's process", data: data,
		value: fmt.Sprintf("%.1f MB", float64(maxRSS)/1024), target: "< 100 MB", pass: verdict(maxRSS < 100*1024),
		note: "max over the repetitions of rusage Maxrss of the child process (Go runtime included)"})
	return nil
}

// onCopy runs fn on a fresh copy of template, dropped afterwards.
func onCopy(ctx context.Context, b *bench, template string, fn func(pool *pgxpool.Pool, url string) error) error {
	pool, full, err := b.copyDB(ctx, template, "copy")
	if err != nil {
		return err
	}
	defer b.dropDB(ctx, full)
	defer pool.Close()
	return fn(pool, b.url(full))
}

// today is the database's current UTC date, the date the jobs compute from their clock.
func today(ctx context.Context, pool *pgxpool.Pool) time.Time {
	var d time.Time
	_ = pool.QueryRow(ctx, `SELECT (now() AT TIME ZONE 'UTC')::date`).Scan(&d)
	return d
}

// naiveLoop reads every due id, processes the first sample of them one by one and returns
// the id read plus the sample's time scaled to all n members.
func naiveLoop(ctx context.Context, pool *pgxpool.Pool, job, idsSQL, updateSQL string, sample, n int) (time.Duration, error) {
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return 0, err
	}
	defer conn.Release()
	day := today(ctx, pool)
	start := time.Now()
	rows, err := conn.Query(ctx, idsSQL, day)
	if err != nil {
		return 0, err
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return 0, err
	}
	readIDs := time.Since(start)
	if len(ids) != n {
		return 0, fmt.Errorf("naive: %d due ids, want %d", len(ids), n)
	}
	start = time.Now()
	for _, id := range ids[:sample] {
		var ok bool
		if err := conn.QueryRow(ctx, naiveLockSQL, job, id).Scan(&ok); err != nil {
			return 0, err
		}
		if !ok {
			continue
		}
		err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
			if job != "plan-change" {
				_, err := tx.Exec(ctx, updateSQL, id)
				return err
			}
			var from, to int64
			var eff time.Time
			if err := tx.QueryRow(ctx, updateSQL, id).Scan(&from, &to, &eff); err != nil {
				return err
			}
			_, err := tx.Exec(ctx, naivePlanChangeHistorySQL, id, from, to, eff)
			return err
		})
		if err != nil {
			return 0, fmt.Errorf("naive member %d: %w", id, err)
		}
		if _, err := conn.Exec(ctx, naiveUnlockSQL, job, id); err != nil {
			return 0, err
		}
	}
	perMember := time.Since(start) / time.Duration(sample)
	return readIDs + perMember*time.Duration(n), nil
}
