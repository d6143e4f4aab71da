package jobs

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/schedulerhq/scheduler/internal/jobcontract"
)

// NoShowDetection marks as NO_SHOW (no_show_at = the run's clock) each BOOKED appointment
// that was not checked in by its start plus the grace (SCHEDULER_NO_SHOW_GRACE, 15 minutes).
// It sends nothing; no-show-recovery and no-show-rate read what it marks.
//
// Never a no-show for an appointment that was checked in: each appointment is try-locked
// (skipped if another run holds it), the UPDATE re-checks BOOKED and checked_in_at IS NULL on
// the row's latest committed version (READ COMMITTED re-evaluates the guard after waiting for
// a concurrent check-in), and a CHECK constraint refuses NO_SHOW with checked_in_at set
// whatever happens.
//
// Backlog: every overdue BOOKED appointment is marked, however old: the transition is a
// correction of state, not a message, so catching up is harmless (no-show-recovery only
// writes to the no-shows of the last 7 days).
type NoShowDetection struct {
	s AppointmentSettings
}

// NewNoShowDetection returns the no-show-detection job.
func NewNoShowDetection(s AppointmentSettings) jobcontract.Job {
	return &NoShowDetection{s: s.withDefaults()}
}

func (*NoShowDetection) Name() string { return "no-show-detection" }

func (*NoShowDetection) Defaults() jobcontract.Defaults {
	return jobcontract.Defaults{Schedule: "*/15 * * * *", Timeout: 3 * time.Minute}
}

// overdueSQL reads the next overdue BOOKED appointments not checked in, in keyset order
// along appointments_booked_start_idx.
const overdueSQL = `
SELECT a.id, a.start_at
FROM appointments a
WHERE a.status = 'BOOKED'
  AND a.checked_in_at IS NULL
  AND a.start_at < @now::timestamptz - @grace::interval
  AND (a.start_at, a.id) > (@after_at, @after_id)
ORDER BY a.start_at, a.id
LIMIT @limit`

// markNoShowSQL marks the locked appointments @ids NO_SHOW. Guard: still BOOKED, still not
// checked in, still overdue (not moved) since the batch read them.
const markNoShowSQL = `
UPDATE appointments
SET status = 'NO_SHOW', no_show_at = @now
WHERE id = ANY(@ids::bigint[])
  AND status = 'BOOKED'
  AND checked_in_at IS NULL
  AND start_at < @now::timestamptz - @grace::interval`

// Run marks every overdue appointment; a dry run counts them and commits nothing.
func (j *NoShowDetection) Run(ctx context.Context, env *jobcontract.Env) (jobcontract.Stats, error) {
	args := pgx.NamedArgs{"now": env.Now, "grace": j.s.NoShowGrace}
	st, err := (&jobcontract.Walk[appointmentRow]{
		Job:       j.Name(),
		BatchSize: j.s.BatchSize,
		Read:      overdueSQL,
		Args:      args,
		Start:     pgx.NamedArgs{"after_at": time.Time{}, "after_id": int64(0)},
		Keyset:    func(a appointmentRow) pgx.NamedArgs { return pgx.NamedArgs{"after_at": a.At, "after_id": a.ID} },
		Lock:      func(a appointmentRow) int64 { return a.ID },
		Parallel:  appointmentParallel,
		Apply: func(ctx context.Context, b *jobcontract.Batch[appointmentRow]) error {
			tag, err := b.Tx.Exec(ctx, markNoShowSQL, pgx.NamedArgs{
				"ids": jobcontract.Column(b.Rows, func(a appointmentRow) int64 { return a.ID }),
				"now": env.Now, "grace": j.s.NoShowGrace,
			})
			if err != nil {
				return fmt.Errorf("mark no-shows: %w", err)
			}
			b.Stats.Changed += tag.RowsAffected()
			// Locked but refused by the guard: checked in, cancelled or marked by another
			// run since the batch was read.
			b.CountStale(tag.RowsAffected())
			return nil
		},
	}).Run(ctx, env)
	env.Log.Info("no-shows marked", "processed", st.Processed, "changed", st.Changed,
		"skipped_locked", st.SkippedLocked, "dry_run", env.Params.DryRun)
	return st, err
}
