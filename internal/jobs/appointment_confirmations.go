package jobs

import (
	"time"

	"github.com/schedulerhq/scheduler/internal/jobcontract"
)

// AppointmentConfirmations sends one booking confirmation to the contact of each BOOKED
// appointment booked during the last 24 hours (the run's clock) that has not started.
// Exactly once per appointment, never for a cancelled one (see appointments.go).
//
// Backlog: a booking older than 24 hours is never confirmed, so enabling the job on an
// existing database sends no flood, and neither is one whose appointment has started. The
// bookings whose confirmation window (24 hours after booking, or the start if sooner) closed
// during the last hour unconfirmed are counted as too_late.
type AppointmentConfirmations struct{ appointmentMessages }

// NewAppointmentConfirmations returns the appointment-confirmations job.
func NewAppointmentConfirmations(s AppointmentSettings, pipe *Pipeline) jobcontract.Job {
	return &AppointmentConfirmations{newAppointmentMessages(appointmentJob{
		name:     "appointment-confirmations",
		kind:     "appointment-confirmation",
		defaults: jobcontract.Defaults{Schedule: "0 * * * *", Timeout: 5 * time.Minute},
		keyset:   "booked_at",
		window:   confirmationsWindow,
		to:       toContact,
		tooLate:  confirmationsTooLate,
	}, s, pipe)}
}

// confirmationsWindow: BOOKED, booked in (now - 24 h, now], not started.
const confirmationsWindow = `a.status = 'BOOKED'
      AND a.booked_at > @now::timestamptz - interval '24 hours'
      AND a.booked_at <= @now::timestamptz
      AND a.start_at > @now::timestamptz`

// confirmationsTooLate: BOOKED, whose window closed (24 h after booking, or at the start if
// sooner) in (now - 1 h, now].
const confirmationsTooLate = `a.status = 'BOOKED'
  AND a.booked_at > @now::timestamptz - interval '25 hours'
  AND a.booked_at <= @now::timestamptz
  AND least(a.booked_at + interval '24 hours', a.start_at) > @now::timestamptz - interval '1 hour'
  AND least(a.booked_at + interval '24 hours', a.start_at) <= @now::timestamptz`
