package jobs

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
)

// NewRoundsOpen returns the rounds-open job: every 5 minutes, each scheduled round whose
// group's local clock has reached the group's drop time on or after the round's date opens,
// with open_at = now and close_at = open_at + 24 h.
//
// The drop instant is the first instant the group's clock reads the drop time or later
// (dropInstant): a drop time inside a spring-forward gap opens at the end of the gap, one
// that occurs twice on a fall-back day opens at its first occurrence, and the status guard
// keeps it from opening again at the second. It is computed in Go, once per round, from the
// zone database, so PostgreSQL never evaluates AT TIME ZONE on a zone name it might reject
// (which would abort the whole batch): a group whose zone cannot be loaded is skipped,
// counted as bad_timezone and logged, and the others proceed.
func NewRoundsOpen() Job { return &roundsOpen{batchSize: roundsBatchSize} }

type roundsOpen struct{ batchSize int }

func (*roundsOpen) Name() string { return "rounds-open" }

func (*roundsOpen) Defaults() Defaults {
	// The timeout stays below the period so that one slow run never swallows the next slot.
	return Defaults{Schedule: "*/5 * * * *", Timeout: 4 * time.Minute}
}

// roundsOpenCandidatesSQL streams scheduled rounds that may be due, keyset on
// (scheduled_for, id) along the partial index of scheduled rounds. No zone's clock runs more
// than maxUTCOffset ahead of UTC, so a round dated after @last_date cannot be due yet.
const roundsOpenCandidatesSQL = `
SELECT r.id, r.group_id, r.scheduled_for, g.timezone, gs.drop_time
FROM daily_rounds r
JOIN groups g ON g.id = r.group_id
LEFT JOIN group_settings gs ON gs.group_id = r.group_id
WHERE r.status = 'scheduled'
  AND r.scheduled_for <= @last_date
  AND (r.scheduled_for, r.id) > (@after_date, @after_id)
ORDER BY r.scheduled_for, r.id
LIMIT @limit`

// roundsOpenSQL opens the due rounds of one batch. Each is guarded by its current state:
// still scheduled, and its group's zone and drop time still the ones its drop instant was
// computed from.
const roundsOpenSQL = `
UPDATE daily_rounds r
SET status = 'open', open_at = @open_at, close_at = @close_at
FROM unnest(@ids::bigint[], @timezones::text[], @drop_times::time[]) AS due (id, timezone, drop_time),
     groups g,
     group_settings gs
WHERE r.id = due.id
  AND r.status = 'scheduled'
  AND g.id = r.group_id AND g.timezone = due.timezone
  AND gs.group_id = r.group_id AND gs.drop_time = due.drop_time`

type scheduledRound struct {
	id           int64
	groupID      int64
	scheduledFor time.Time
	timezone     string
	dropTime     pgtype.Time
}

func (j *roundsOpen) Run(ctx context.Context, env *Env) (Stats, error) {
	var stats Stats
	zones := zoneCache{}
	lastDate := localDate(env.Now.Add(maxUTCOffset), time.UTC)
	var afterDate time.Time
	var afterID int64
	for {
		if err := ctx.Err(); err != nil {
			return stats, err
		}
		rows, err := env.ReadOnly.Query(ctx, roundsOpenCandidatesSQL, pgx.NamedArgs{
			"last_date": lastDate, "after_date": afterDate, "after_id": afterID, "limit": j.batchSize,
		})
		if err != nil {
			return stats, fmt.Errorf("read scheduled rounds: %w", err)
		}
		batch, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (scheduledRound, error) {
			var r scheduledRound
			err := row.Scan(&r.id, &r.groupID, &r.scheduledFor, &r.timezone, &r.dropTime)
			return r, err
		})
		if err != nil {
			return stats, fmt.Errorf("read scheduled rounds: %w", err)
		}
		if len(batch) == 0 {
			return stats, nil
		}
		last := batch[len(batch)-1]
		afterDate, afterID = last.scheduledFor, last.id
		stats.Processed += int64(len(batch))

		var due []scheduledRound
		for _, r := range batch {
			if !r.dropTime.Valid {
				stats.Count(detailNoSettings, 1)
				env.Log.Warn("rounds-open: group has no settings (drop time); round left scheduled",
					"group_id", r.groupID, "round_id", r.id)
				continue
			}
			loc, err := zones.load(r.timezone)
			if err != nil {
				stats.Errors++
				stats.Count(detailBadTimezone, 1)
				env.Log.Warn("rounds-open: group has an invalid time zone; round skipped, fix groups.timezone",
					"group_id", r.groupID, "round_id", r.id, "timezone", r.timezone, "error", err)
				continue
			}
			drop := time.Duration(r.dropTime.Microseconds) * time.Microsecond
			if !env.Now.Before(dropInstant(r.scheduledFor, drop, loc)) {
				due = append(due, r)
			}
		}
		if len(due) == 0 {
			continue
		}
		batchStats, err := j.openBatch(ctx, env, due)
		if err != nil {
			return stats, err
		}
		stats.Add(batchStats)
	}
}

// openBatch locks the due rounds' groups and opens their rounds in one fenced transaction.
func (j *roundsOpen) openBatch(ctx context.Context, env *Env, due []scheduledRound) (Stats, error) {
	var stats Stats
	groupIDs := make([]int64, len(due))
	for i, r := range due {
		groupIDs[i] = r.groupID
	}
	err := inBatchTx(ctx, env, func(tx pgx.Tx) error {
		stats = Stats{}
		locked, err := tryLockGroups(ctx, tx, j.Name(), groupIDs)
		if err != nil {
			return err
		}
		var ids []int64
		var timezones []string
		var dropTimes []pgtype.Time
		for _, r := range due {
			if !locked[r.groupID] {
				stats.SkippedLocked++
				continue
			}
			ids = append(ids, r.id)
			timezones = append(timezones, r.timezone)
			dropTimes = append(dropTimes, r.dropTime)
		}
		if len(ids) == 0 {
			return nil
		}
		tag, err := tx.Exec(ctx, roundsOpenSQL, pgx.NamedArgs{
			"ids": ids, "timezones": timezones, "drop_times": dropTimes,
			"open_at": env.Now, "close_at": env.Now.Add(roundDuration),
		})
		if err != nil {
			return fmt.Errorf("open rounds: %w", err)
		}
		stats.Changed = tag.RowsAffected()
		return nil
	})
	if err != nil {
		return Stats{}, fmt.Errorf("rounds-open batch of %d rounds: %w", len(due), err)
	}
	return stats, nil
}
