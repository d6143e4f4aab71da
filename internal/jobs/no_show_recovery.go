package jobs

import (
	"time"

	"github.com/schedulerhq/scheduler/internal/jobcontract"
)

// NoShowRecovery sends one rebooking message to the contact of each NO_SHOW appointment that
// started during the last 7 days (the run's clock). Exactly once per appointment (see
// appointments.go).
//
// Backlog: a no-show older than 7 days gets no message (an invitation to rebook a week-old
// appointment is noise), so marking a long backlog as no-shows sends no flood. The no-shows
// whose 7 days ran out during the last hour without a message are counted as too_late.
type NoShowRecovery struct{ appointmentMessages }

// NewNoShowRecovery returns the no-show-recovery job.
func NewNoShowRecovery(s AppointmentSettings, pipe *Pipeline) jobcontract.Job {
	return &NoShowRecovery{newAppointmentMessages(appointmentJob{
		name:     "no-show-recovery",
		kind:     "no-show-recovery",
		defaults: jobcontract.Defaults{Schedule: "0 * * * *", Timeout: 5 * time.Minute},
		keyset:   "start_at",
		window:   noShowRecoveryWindow,
		to:       toContact,
		tooLate:  noShowRecoveryTooLate,
	}, s, pipe)}
}

// noShowRecoveryWindow: NO_SHOW (not corrected back since), started in [now - 7 days, now].
const noShowRecoveryWindow = `a.status = 'NO_SHOW'
      AND a.start_at >= @now::timestamptz - interval '7 days'
      AND a.start_at <= @now::timestamptz`

// noShowRecoveryTooLate: NO_SHOW, started in [now - 7 days - 1 h, now - 7 days).
const noShowRecoveryTooLate = `a.status = 'NO_SHOW'
  AND a.start_at >= @now::timestamptz - interval '7 days 1 hour'
  AND a.start_at < @now::timestamptz - interval '7 days'`
