package jobs

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// NewRoundsClose returns the rounds-close job: every 5 minutes, each open round whose
// close_at has passed closes (closed_at = now). The UPDATE is guarded by the round's status
// and close_at, so a round closes once, and only when due, whoever else runs.
func NewRoundsClose() Job { return &roundsClose{batchSize: roundsBatchSize} }

type roundsClose struct{ batchSize int }

func (*roundsClose) Name() string { return "rounds-close" }

func (*roundsClose) Defaults() Defaults {
	// The timeout stays below the period so that one slow run never swallows the next slot.
	return Defaults{Schedule: "*/5 * * * *", Timeout: 4 * time.Minute}
}

// roundsCloseCandidatesSQL streams the open rounds due to close, keyset on (close_at, id)
// along the partial index of open rounds.
const roundsCloseCandidatesSQL = `
SELECT r.id, r.group_id, r.close_at
FROM daily_rounds r
WHERE r.status = 'open'
  AND r.close_at <= @now
  AND (r.close_at, r.id) > (@after_close_at, @after_id)
ORDER BY r.close_at, r.id
LIMIT @limit`

// roundsCloseSQL closes the rounds of one batch that are still open and due.
const roundsCloseSQL = `
UPDATE daily_rounds
SET status = 'closed', closed_at = @now
WHERE id = ANY(@ids::bigint[])
  AND status = 'open'
  AND close_at <= @now`

type openRound struct {
	id      int64
	groupID int64
	closeAt time.Time
}

func (j *roundsClose) Run(ctx context.Context, env *Env) (Stats, error) {
	var stats Stats
	var afterCloseAt time.Time
	var afterID int64
	for {
		if err := ctx.Err(); err != nil {
			return stats, err
		}
		rows, err := env.ReadOnly.Query(ctx, roundsCloseCandidatesSQL, pgx.NamedArgs{
			"now": env.Now, "after_close_at": afterCloseAt, "after_id": afterID, "limit": j.batchSize,
		})
		if err != nil {
			return stats, fmt.Errorf("read open rounds due to close: %w", err)
		}
		batch, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (openRound, error) {
			var r openRound
			err := row.Scan(&r.id, &r.groupID, &r.closeAt)
			return r, err
		})
		if err != nil {
			return stats, fmt.Errorf("read open rounds due to close: %w", err)
		}
		if len(batch) == 0 {
			return stats, nil
		}
		last := batch[len(batch)-1]
		afterCloseAt, afterID = last.closeAt, last.id
		stats.Processed += int64(len(batch))

		batchStats, err := j.closeBatch(ctx, env, batch)
		if err != nil {
			return stats, err
		}
		stats.Add(batchStats)
	}
}

// closeBatch locks the rounds' groups and closes their rounds in one fenced transaction.
func (j *roundsClose) closeBatch(ctx context.Context, env *Env, batch []openRound) (Stats, error) {
	var stats Stats
	groupIDs := make([]int64, len(batch))
	for i, r := range batch {
		groupIDs[i] = r.groupID
	}
	err := inBatchTx(ctx, env, func(tx pgx.Tx) error {
		stats = Stats{}
		locked, err := tryLockGroups(ctx, tx, j.Name(), groupIDs)
		if err != nil {
			return err
		}
		var ids []int64
		for _, r := range batch {
			if !locked[r.groupID] {
				stats.SkippedLocked++
				continue
			}
			ids = append(ids, r.id)
		}
		if len(ids) == 0 {
			return nil
		}
		tag, err := tx.Exec(ctx, roundsCloseSQL, pgx.NamedArgs{"ids": ids, "now": env.Now})
		if err != nil {
			return fmt.Errorf("close rounds: %w", err)
		}
		stats.Changed = tag.RowsAffected()
		return nil
	})
	if err != nil {
		return Stats{}, fmt.Errorf("rounds-close batch of %d rounds: %w", len(batch), err)
	}
	return stats, nil
}
