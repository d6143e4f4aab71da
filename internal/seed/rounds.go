// Package seed fills a database with demo data for the jobs (scheduler seed) and for the
// benchmarks. Every seed function is idempotent and set-based: running it twice adds
// nothing, and 100 000 entities take seconds.
package seed

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// roundsSeedLockSQL serialises concurrent seeds, so two of them never insert the same
// groups twice.
const roundsSeedLockSQL = `SELECT pg_advisory_xact_lock(hashtextextended('seed:rounds', 0))`

// roundsGroupsSQL inserts the seed groups that do not exist yet, named seed-group-<n>,
// n = 1..@groups. Group n lives in the n-th zone (wrapping) of PostgreSQL's region zones,
// so a large seed covers every one of them (about 500); every 10th group is inactive.
const roundsGroupsSQL = `
WITH zones AS (
    SELECT array_agg(name ORDER BY name) AS names
    FROM pg_timezone_names
    WHERE (name LIKE '%/%' AND name NOT LIKE 'posix/%' AND name NOT LIKE 'right/%' AND name NOT LIKE 'Etc/%')
       OR name = 'UTC'
), wanted AS (
    SELECT n, format('seed-group-%s', lpad(n::text, 7, '0')) AS name
    FROM generate_series(1, @groups::int) AS n
)
INSERT INTO groups (name, timezone, is_active)
SELECT w.name, z.names[1 + (w.n - 1) % cardinality(z.names)], w.n % 10 <> 3
FROM wanted w, zones z
WHERE NOT EXISTS (SELECT 1 FROM groups g WHERE g.name = w.name)
ORDER BY w.n`

// roundsSettingsSQL gives each seed group without settings a drop time, cycling through
// ordinary times and ones that fall in DST gaps (02:30 does not exist on spring-forward
// days in Europe and North America, 02:15 on Lord Howe's) or overlaps (01:30, 02:30 occur
// twice on fall-back days).
const roundsSettingsSQL = `
INSERT INTO group_settings (group_id, drop_time)
SELECT g.id, (ARRAY['09:00', '12:30', '18:00', '20:00', '02:30', '00:00', '23:45', '01:30', '02:15']::time[])
             [1 + substr(g.name, 12)::int % 9]
FROM groups g
WHERE g.name ~ '^seed-group-[0-9]+$'
  AND NOT EXISTS (SELECT 1 FROM group_settings s WHERE s.group_id = g.id)`

// roundsPromptsSQL gives each seed group without prompts a few of them, the last one
// inactive: four for most groups (so rounds-create falls back to the least recently used
// prompt once all three active ones are in its 7-round window) and ten for every 10th group
// (nine active: more than the window, so it never has to repeat one). Group 2 and every
// 10 000th get only inactive prompts (rounds-create skips them as no_prompt). Few rows per
// group keep a 100 000-group seed within seconds: each prompt row costs a foreign-key check.
const roundsPromptsSQL = `
WITH seed_groups AS (
    SELECT g.id, g.name, substr(g.name, 12)::int AS n
    FROM groups g
    WHERE g.name ~ '^seed-group-[0-9]+$'
      AND NOT EXISTS (SELECT 1 FROM group_prompts p WHERE p.group_id = g.id)
)
INSERT INTO group_prompts (group_id, text, is_active)
SELECT s.id,
       format('Prompt %s of %s', k, s.name),
       k < size AND s.n <> 2 AND s.n % 10000 <> 0
FROM seed_groups s
CROSS JOIN LATERAL (SELECT CASE WHEN s.n % 10 = 5 THEN 10 ELSE 4 END) AS c (size)
CROSS JOIN LATERAL generate_series(1, c.size) AS k`

// Rounds seeds groups for the rounds jobs: groups spread over every region time zone
// PostgreSQL knows, each with a drop time (some inside DST gaps and overlaps) and a few
// prompts (one inactive), a tenth of them inactive, and a few with no active prompt. It
// returns how many groups it inserted: 0 when they all exist already.
func Rounds(ctx context.Context, pool *pgxpool.Pool, groups int) (int, error) {
	var inserted int64
	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, roundsSeedLockSQL); err != nil {
			return err
		}
		tag, err := tx.Exec(ctx, roundsGroupsSQL, pgx.NamedArgs{"groups": groups})
		if err != nil {
			return fmt.Errorf("insert groups: %w", err)
		}
		inserted = tag.RowsAffected()
		if _, err := tx.Exec(ctx, roundsSettingsSQL); err != nil {
			return fmt.Errorf("insert group settings: %w", err)
		}
		if _, err := tx.Exec(ctx, roundsPromptsSQL); err != nil {
			return fmt.Errorf("insert group prompts: %w", err)
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("seed rounds: %w", err)
	}
	return int(inserted), nil
}
