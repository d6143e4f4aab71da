package jobs

import (
	"time"

	"github.com/schedulerhq/scheduler/internal/jobcontract"
)

// AppointmentRemindersDay sends one reminder to the contact of each BOOKED appointment that
// starts more than 1 hour and at most 24 hours from now (the run's clock): the day before.
// Exactly once per appointment, never for a cancelled one (see appointments.go).
//
// Backlog: a reminder whose window passed unsent (the cluster was down, the job paused) is
// not sent late — a day-before reminder less than an hour before the start is noise, and the
// hour reminder follows. The appointments that entered their last hour during the last hour
// without a reminder (booked before that) are counted as too_late.
type AppointmentRemindersDay struct{ appointmentMessages }

// NewAppointmentRemindersDay returns the appointment-reminders-day job.
func NewAppointmentRemindersDay(s AppointmentSettings, pipe *Pipeline) jobcontract.Job {
	return &AppointmentRemindersDay{newAppointmentMessages(appointmentJob{
		name:     "appointment-reminders-day",
		kind:     "appointment-reminder-day",
		defaults: jobcontract.Defaults{Schedule: "0 * * * *", Timeout: 5 * time.Minute},
		keyset:   "start_at",
		window:   remindersDayWindow,
		to:       toContact,
		tooLate:  remindersDayTooLate,
	}, s, pipe)}
}

// remindersDayWindow: BOOKED, starting in (now + 1 h, now + 24 h].
const remindersDayWindow = `a.status = 'BOOKED'
      AND a.start_at > @now::timestamptz + interval '1 hour'
      AND a.start_at <= @now::timestamptz + interval '24 hours'`

// remindersDayTooLate: BOOKED, starting in (now, now + 1 h], booked before its window closed.
const remindersDayTooLate = `a.status = 'BOOKED'
  AND a.start_at > @now::timestamptz
  AND a.start_at <= @now::timestamptz + interval '1 hour'
  AND a.booked_at < a.start_at - interval '1 hour'`
