package jobs

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/schedulerhq/scheduler/internal/jobcontract"
)

// NewRoundsClose returns the rounds-close job: every 5 minutes, each open round whose
// close_at has passed closes (closed_at = now). The UPDATE is guarded by the round's status
// and close_at, so a round closes once, and only when due, whoever else runs.
func NewRoundsClose() jobcontract.Job { return &roundsClose{batchSize: roundsBatchSize} }

type roundsClose struct{ batchSize int }

func (*roundsClose) Name() string { return "rounds-close" }

func (*roundsClose) Defaults() jobcontract.Defaults {
	// The timeout stays below the period so that one slow run never swallows the next slot.
	return jobcontract.Defaults{Schedule: "*/5 * * * *", Timeout: 4 * time.Minute}
}

// roundsCloseCandidatesSQL reads the open rounds due to close, keyset on (close_at, id)
// along the partial index of open rounds. Each round is locked by its group.
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
	ID      int64
	GroupID int64
	CloseAt time.Time
}

func (j *roundsClose) Run(ctx context.Context, env *jobcontract.Env) (jobcontract.Stats, error) {
	return (&jobcontract.Walk[openRound]{
		Job:       j.Name(),
		BatchSize: j.batchSize,
		Read:      roundsCloseCandidatesSQL,
		Args:      pgx.NamedArgs{"now": env.Now},
		Start:     pgx.NamedArgs{"after_close_at": time.Time{}, "after_id": int64(0)},
		Keyset: func(r openRound) pgx.NamedArgs {
			return pgx.NamedArgs{"after_close_at": r.CloseAt, "after_id": r.ID}
		},
		Lock: func(r openRound) int64 { return r.GroupID },
		Apply: func(ctx context.Context, b *jobcontract.Batch[openRound]) error {
			tag, err := b.Tx.Exec(ctx, roundsCloseSQL, pgx.NamedArgs{
				"ids": jobcontract.Column(b.Rows, func(r openRound) int64 { return r.ID }), "now": env.Now,
			})
			if err != nil {
				return fmt.Errorf("close rounds: %w", err)
			}
			b.Stats.Changed += tag.RowsAffected()
			return nil
		},
	}).Run(ctx, env)
}
