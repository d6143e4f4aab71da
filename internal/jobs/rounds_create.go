package jobs

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// NewRoundsCreate returns the rounds-create job: every hour, each active group whose last
// round closed at least 24 hours ago (or that never had one) gets a scheduled round for its
// own local date, with an active prompt it has not used in its last 7 rounds (or, when it
// used them all, the least recently used one).
//
// Guarantees: one round per group and local date (a per-group try-lock, a re-check of the
// group's last round under that lock, and the unique (group_id, scheduled_for) index with
// ON CONFLICT DO NOTHING as the last line of defence); never a round without a prompt (a
// group with no active prompt is skipped and counted as no_prompt); a group whose time
// zone cannot be loaded is skipped, counted as bad_timezone and logged, and the others
// proceed.
func NewRoundsCreate() Job { return &roundsCreate{batchSize: roundsBatchSize} }

type roundsCreate struct{ batchSize int }

func (*roundsCreate) Name() string { return "rounds-create" }

func (*roundsCreate) Defaults() Defaults {
	return Defaults{Schedule: "0 * * * *", Timeout: 15 * time.Minute}
}

// roundDueSQL is true when group g is due a new round at $now: it never had a round, or its
// latest one closed at least 24 hours ago. A latest round still scheduled or open is never
// replaced.
const roundDueSQL = `NOT EXISTS (
      SELECT 1
      FROM (SELECT r.status, r.closed_at
            FROM daily_rounds r
            WHERE r.group_id = g.id
            ORDER BY r.scheduled_for DESC
            LIMIT 1) AS latest
      WHERE latest.status <> 'closed' OR latest.closed_at > @now::timestamptz - interval '24 hours')`

// roundsCreateCandidatesSQL streams the active groups due a round, in id order after @after.
// It reads outside any transaction; each group is checked again under its lock.
const roundsCreateCandidatesSQL = `
SELECT g.id, g.timezone, gs.group_id IS NOT NULL AS has_settings
FROM groups g
LEFT JOIN group_settings gs ON gs.group_id = g.id
WHERE g.id > @after
  AND g.is_active
  AND ` + roundDueSQL + `
ORDER BY g.id
LIMIT @limit`

// roundsCreateSQL creates the rounds of one batch of locked groups, given each group's
// local date, and reports per group whether it was still due, had no active prompt, or got
// its round.
const roundsCreateSQL = `
WITH due AS (
    -- Checked again now that this transaction holds the group's lock: a concurrent run may
    -- have created the group's round since the candidates were read.
    SELECT g.id AS group_id, input.local_date
    FROM unnest(@group_ids::bigint[], @local_dates::date[]) AS input (group_id, local_date)
    JOIN groups g ON g.id = input.group_id
    WHERE g.is_active
      AND ` + roundDueSQL + `
), chosen AS (
    SELECT d.group_id, d.local_date, COALESCE(
        -- An active prompt none of the group's last 7 rounds used (NOT EXISTS, so a NULL can
        -- never empty the set as NOT IN would), the least recently used first.
        (SELECT p.id
         FROM group_prompts p
         WHERE p.group_id = d.group_id
           AND p.is_active
           AND NOT EXISTS (
               SELECT 1
               FROM (SELECT r.group_prompt_id
                     FROM daily_rounds r
                     WHERE r.group_id = d.group_id
                     ORDER BY r.scheduled_for DESC
                     LIMIT 7) AS recent
               WHERE recent.group_prompt_id = p.id)
         ORDER BY (SELECT max(r.scheduled_for) FROM daily_rounds r WHERE r.group_prompt_id = p.id) NULLS FIRST, p.id
         LIMIT 1),
        -- Every active prompt was used recently: the least recently used one.
        (SELECT p.id
         FROM group_prompts p
         WHERE p.group_id = d.group_id
           AND p.is_active
         ORDER BY (SELECT max(r.scheduled_for) FROM daily_rounds r WHERE r.group_prompt_id = p.id) NULLS FIRST, p.id
         LIMIT 1)
    ) AS prompt_id
    FROM due d
), created AS (
    INSERT INTO daily_rounds (group_id, group_prompt_id, scheduled_for, status, created_at)
    SELECT c.group_id, c.prompt_id, c.local_date, 'scheduled', @now
    FROM chosen c
    WHERE c.prompt_id IS NOT NULL
    -- The last line of defence: one round per group and local date.
    ON CONFLICT (group_id, scheduled_for) DO NOTHING
    RETURNING group_id
)
SELECT c.group_id,
       c.prompt_id IS NULL AS no_prompt,
       EXISTS (SELECT 1 FROM created WHERE created.group_id = c.group_id) AS created
FROM chosen c`

func (j *roundsCreate) Run(ctx context.Context, env *Env) (Stats, error) {
	var stats Stats
	zones := zoneCache{}
	var after int64
	for {
		if err := ctx.Err(); err != nil {
			return stats, err
		}
		rows, err := env.ReadOnly.Query(ctx, roundsCreateCandidatesSQL,
			pgx.NamedArgs{"after": after, "now": env.Now, "limit": j.batchSize})
		if err != nil {
			return stats, fmt.Errorf("read groups due a round: %w", err)
		}
		type candidate struct {
			id          int64
			timezone    string
			hasSettings bool
		}
		batch, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (candidate, error) {
			var c candidate
			err := row.Scan(&c.id, &c.timezone, &c.hasSettings)
			return c, err
		})
		if err != nil {
			return stats, fmt.Errorf("read groups due a round: %w", err)
		}
		if len(batch) == 0 {
			return stats, nil
		}
		after = batch[len(batch)-1].id
		stats.Processed += int64(len(batch))

		var ids []int64
		var dates []time.Time
		for _, c := range batch {
			if !c.hasSettings {
				// Without a drop time the round could never open, and the group would get
				// no further round: better none until its settings exist.
				stats.Count(detailNoSettings, 1)
				env.Log.Warn("rounds-create: group has no settings (drop time); skipped", "group_id", c.id)
				continue
			}
			loc, err := zones.load(c.timezone)
			if err != nil {
				stats.Errors++
				stats.Count(detailBadTimezone, 1)
				env.Log.Warn("rounds-create: group has an invalid time zone; skipped, fix groups.timezone",
					"group_id", c.id, "timezone", c.timezone, "error", err)
				continue
			}
			ids = append(ids, c.id)
			dates = append(dates, localDate(env.Now, loc))
		}
		if len(ids) == 0 {
			continue
		}
		batchStats, err := j.createBatch(ctx, env, ids, dates)
		if err != nil {
			return stats, err
		}
		stats.Add(batchStats)
	}
}

// createBatch locks the batch's groups and creates their rounds in one fenced transaction.
func (j *roundsCreate) createBatch(ctx context.Context, env *Env, ids []int64, dates []time.Time) (Stats, error) {
	var stats Stats
	err := inBatchTx(ctx, env, func(tx pgx.Tx) error {
		stats = Stats{}
		locked, err := tryLockGroups(ctx, tx, j.Name(), ids)
		if err != nil {
			return err
		}
		var lockedIDs []int64
		var lockedDates []time.Time
		for i, id := range ids {
			if !locked[id] {
				stats.SkippedLocked++
				continue
			}
			lockedIDs = append(lockedIDs, id)
			lockedDates = append(lockedDates, dates[i])
		}
		if len(lockedIDs) == 0 {
			return nil
		}
		rows, err := tx.Query(ctx, roundsCreateSQL, pgx.NamedArgs{
			"group_ids": lockedIDs, "local_dates": lockedDates, "now": env.Now,
		})
		if err != nil {
			return fmt.Errorf("create rounds: %w", err)
		}
		var groupID int64
		var noPrompt, created bool
		_, err = pgx.ForEachRow(rows, []any{&groupID, &noPrompt, &created}, func() error {
			switch {
			case noPrompt:
				stats.Count(detailNoPrompt, 1)
				env.Log.Warn("rounds-create: group has no active prompt; skipped", "group_id", groupID)
			case created:
				stats.Changed++
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("create rounds: %w", err)
		}
		return nil
	})
	if err != nil {
		return Stats{}, fmt.Errorf("rounds-create batch of %d groups: %w", len(ids), err)
	}
	return stats, nil
}
