package jobs

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/schedulerhq/scheduler/internal/jobcontract"
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
func NewRoundsCreate() jobcontract.Job { return &roundsCreate{batchSize: roundsBatchSize} }

type roundsCreate struct{ batchSize int }

func (*roundsCreate) Name() string { return "rounds-create" }

func (*roundsCreate) Defaults() jobcontract.Defaults {
	return jobcontract.Defaults{Schedule: "0 * * * *", Timeout: 15 * time.Minute}
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

// roundsCreateCandidatesSQL reads the active groups due a round, in id order after @after;
// each group is checked again, after its lock, by roundsCreateSQL.
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

// groupDue is a group that may be due a round.
type groupDue struct {
	ID          int64
	Timezone    string
	HasSettings bool
}

func (j *roundsCreate) Run(ctx context.Context, env *jobcontract.Env) (jobcontract.Stats, error) {
	zones := zoneCache{}
	return (&jobcontract.Walk[groupDue]{
		Job:       j.Name(),
		BatchSize: j.batchSize,
		Read:      roundsCreateCandidatesSQL,
		Args:      pgx.NamedArgs{"now": env.Now},
		Start:     pgx.NamedArgs{"after": int64(0)},
		Keyset:    func(g groupDue) pgx.NamedArgs { return pgx.NamedArgs{"after": g.ID} },
		Filter: func(g groupDue, st *jobcontract.Stats) bool {
			if !g.HasSettings {
				// Without a drop time the round could never open, and the group would get
				// no further round: better none until its settings exist.
				st.Count(detailNoSettings, 1)
				env.Log.Warn("rounds-create: group has no settings (drop time); skipped", "group_id", g.ID)
				return false
			}
			if _, err := zones.load(g.Timezone); err != nil {
				st.Errors++
				st.Count(detailBadTimezone, 1)
				env.Log.Warn("rounds-create: group has an invalid time zone; skipped, fix groups.timezone",
					"group_id", g.ID, "timezone", g.Timezone, "error", err)
				return false
			}
			return true
		},
		Lock: func(g groupDue) int64 { return g.ID },
		Apply: func(ctx context.Context, b *jobcontract.Batch[groupDue]) error {
			rows, err := b.Tx.Query(ctx, roundsCreateSQL, pgx.NamedArgs{
				"group_ids": jobcontract.Column(b.Rows, func(g groupDue) int64 { return g.ID }),
				"local_dates": jobcontract.Column(b.Rows, func(g groupDue) time.Time {
					loc, _ := zones.load(g.Timezone) // loaded by Filter
					return localDate(env.Now, loc)
				}),
				"now": env.Now,
			})
			if err != nil {
				return fmt.Errorf("create rounds: %w", err)
			}
			var groupID int64
			var noPrompt, created bool
			_, err = pgx.ForEachRow(rows, []any{&groupID, &noPrompt, &created}, func() error {
				switch {
				case noPrompt:
					b.Stats.Count(detailNoPrompt, 1)
					env.Log.Warn("rounds-create: group has no active prompt; skipped", "group_id", groupID)
				case created:
					b.Stats.Changed++
				}
				return nil
			})
			if err != nil {
				return fmt.Errorf("create rounds: %w", err)
			}
			return nil
		},
	}).Run(ctx, env)
}
