package main

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/schedulerhq/scheduler/internal/seed"
)

// dueRoundsSQL gives every seed group with settings and an active prompt a scheduled round
// for yesterday in its own zone: its drop time has passed everywhere, so rounds-open opens
// them all.
const dueRoundsSQL = `
INSERT INTO daily_rounds (group_id, group_prompt_id, scheduled_for, status)
SELECT g.id, p.id, (now() AT TIME ZONE g.timezone)::date - 1, 'scheduled'
FROM groups g
JOIN group_settings gs ON gs.group_id = g.id
JOIN LATERAL (SELECT min(id) AS id FROM group_prompts WHERE group_id = g.id AND is_active) p ON p.id IS NOT NULL`

// rawRoundsOpenSQL is the cost reference: every due round opened by one UPDATE with AT TIME
// ZONE in SQL. It is not correct in DST gaps (and one bad zone name would abort it whole),
// which is why the job computes drop instants in Go.
const rawRoundsOpenSQL = `
UPDATE daily_rounds r
SET status = 'open', open_at = now(), close_at = now() + interval '24 hours'
FROM groups g, group_settings gs
WHERE r.status = 'scheduled'
  AND g.id = r.group_id AND gs.group_id = r.group_id
  AND (r.scheduled_for + gs.drop_time) AT TIME ZONE g.timezone <= now()`

func benchRounds(ctx context.Context, b *bench) error {
	tmpl, err := b.migratedDB(ctx, "rounds_tmpl")
	if err != nil {
		return err
	}
	defer b.dropDB(ctx, tmpl)
	t := time.Now()
	pool, err := pgxpool.New(ctx, b.url(tmpl))
	if err != nil {
		return err
	}
	var rounds, zones int64
	_, err = seed.Rounds(ctx, pool, b.sz.groups)
	if err == nil {
		_, err = pool.Exec(ctx, dueRoundsSQL)
	}
	if err == nil {
		err = pool.QueryRow(ctx, `
SELECT (SELECT count(*) FROM daily_rounds),
       (SELECT count(DISTINCT g.timezone) FROM daily_rounds r JOIN groups g ON g.id = r.group_id)`).Scan(&rounds, &zones)
	}
	pool.Close()
	if err != nil {
		return fmt.Errorf("build rounds data set: %w", err)
	}
	if err := b.finishTemplate(ctx, tmpl); err != nil {
		return err
	}
	b.log.Info("rounds data set built", "groups", b.sz.groups, "rounds", rounds, "zones", zones, "took", time.Since(t).Round(time.Millisecond))

	var jobTimes, rawTimes []time.Duration
	var changed, maxRSS int64
	for range b.sz.reps {
		err := onCopy(ctx, b, tmpl, func(_ *pgxpool.Pool, url string) error {
			res, err := runJobChild(ctx, "rounds-open", url)
			if err != nil {
				return err
			}
			jobTimes = append(jobTimes, res.took)
			changed, maxRSS = res.stats.Changed, max(maxRSS, res.maxRSSKB)
			return nil
		})
		if err != nil {
			return err
		}
		err = onCopy(ctx, b, tmpl, func(db *pgxpool.Pool, _ string) error {
			start := time.Now()
			tag, err := db.Exec(ctx, rawRoundsOpenSQL)
			if err != nil {
				return fmt.Errorf("raw statement: %w", err)
			}
			rawTimes = append(rawTimes, time.Since(start))
			if tag.RowsAffected() != rounds {
				return fmt.Errorf("raw statement opened %d rounds, want %d", tag.RowsAffected(), rounds)
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	if changed != rounds {
		return fmt.Errorf("rounds-open opened %d rounds, want %d", changed, rounds)
	}
	jm, rm := median(jobTimes), median(rawTimes)
	b.report.add(row{name: "rounds-open job ÷ one raw UPDATE with AT TIME ZONE",
		data:  fmt.Sprintf("%s groups, %d due rounds in %d time zones", count(b.sz.groups), rounds, zones),
		value: dur(jm), ref: dur(rm), ratio: fmt.Sprintf("%.2f", ratio(jm, rm)),
		note: fmt.Sprintf("no target; the raw UPDATE is only the cost reference (not DST-gap correct); job peak RSS %.1f MB; runs: job %s, raw %s",
			float64(maxRSS)/1024, durs(jobTimes), durs(rawTimes))})
	return nil
}
