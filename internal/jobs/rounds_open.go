package jobs

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/schedulerhq/scheduler/internal/jobcontract"
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
func NewRoundsOpen() jobcontract.Job { return &roundsOpen{batchSize: roundsBatchSize} }

type roundsOpen struct{ batchSize int }

func (*roundsOpen) Name() string { return "rounds-open" }

func (*roundsOpen) Defaults() jobcontract.Defaults {
	// The timeout stays below the period so that one slow run never swallows the next slot.
	return jobcontract.Defaults{Schedule: "*/5 * * * *", Timeout: 4 * time.Minute}
}

// roundsOpenCandidatesSQL reads scheduled rounds that may be due, keyset on
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
	ID           int64
	GroupID      int64
	ScheduledFor time.Time
	Timezone     string
	DropTime     pgtype.Time
}

func (j *roundsOpen) Run(ctx context.Context, env *jobcontract.Env) (jobcontract.Stats, error) {
	zones := zoneCache{}
	return (&jobcontract.Walk[scheduledRound]{
		Job:       j.Name(),
		BatchSize: j.batchSize,
		Read:      roundsOpenCandidatesSQL,
		Args:      pgx.NamedArgs{"last_date": localDate(env.Now.Add(maxUTCOffset), time.UTC)},
		Start:     pgx.NamedArgs{"after_date": time.Time{}, "after_id": int64(0)},
		Keyset: func(r scheduledRound) pgx.NamedArgs {
			return pgx.NamedArgs{"after_date": r.ScheduledFor, "after_id": r.ID}
		},
		// Only the rounds whose drop instant has come are opened.
		Filter: func(r scheduledRound, st *jobcontract.Stats) bool {
			if !r.DropTime.Valid {
				st.Count(detailNoSettings, 1)
				env.Log.Warn("rounds-open: group has no settings (drop time); round left scheduled",
					"group_id", r.GroupID, "round_id", r.ID)
				return false
			}
			loc, err := zones.load(r.Timezone)
			if err != nil {
				st.Errors++
				st.Count(detailBadTimezone, 1)
				env.Log.Warn("rounds-open: group has an invalid time zone; round skipped, fix groups.timezone",
					"group_id", r.GroupID, "round_id", r.ID, "timezone", r.Timezone, "error", err)
				return false
			}
			drop := time.Duration(r.DropTime.Microseconds) * time.Microsecond
			return !env.Now.Before(dropInstant(r.ScheduledFor, drop, loc))
		},
		Lock: func(r scheduledRound) int64 { return r.GroupID },
		Apply: func(ctx context.Context, b *jobcontract.Batch[scheduledRound]) error {
			tag, err := b.Tx.Exec(ctx, roundsOpenSQL, pgx.NamedArgs{
				"ids":        jobcontract.Column(b.Rows, func(r scheduledRound) int64 { return r.ID }),
				"timezones":  jobcontract.Column(b.Rows, func(r scheduledRound) string { return r.Timezone }),
				"drop_times": jobcontract.Column(b.Rows, func(r scheduledRound) pgtype.Time { return r.DropTime }),
				"open_at":    env.Now, "close_at": env.Now.Add(roundDuration),
			})
			if err != nil {
				return fmt.Errorf("open rounds: %w", err)
			}
			b.Stats.Changed += tag.RowsAffected()
			return nil
		},
	}).Run(ctx, env)
}
