package jobs

import (
	"time"

	"github.com/schedulerhq/scheduler/internal/jobcontract"
)

// AppointmentRemindersHour sends one reminder to the contact of each BOOKED appointment that
// starts within the next hour (after now, at most 1 hour from now; the run's clock). Exactly
// once per appointment, never for a cancelled one nor for one that has started (see
// appointments.go).
//
// Backlog: once an appointment has started its reminder is pointless, so it is never sent
// late. The appointments that started during the last 15 minutes (the job's period) without
// a reminder are counted as too_late.
type AppointmentRemindersHour struct{ appointmentMessages }

// NewAppointmentRemindersHour returns the appointment-reminders-hour job.
func NewAppointmentRemindersHour(s AppointmentSettings, pipe *Pipeline) jobcontract.Job {
	return &AppointmentRemindersHour{newAppointmentMessages(appointmentJob{
		name:     "appointment-reminders-hour",
		kind:     "appointment-reminder-hour",
		defaults: jobcontract.Defaults{Schedule: "*/15 * * * *", Timeout: 3 * time.Minute},
		keyset:   "start_at",
		window:   remindersHourWindow,
		to:       toContact,
		tooLate:  remindersHourTooLate,
	}, s, pipe)}
}

// remindersHourWindow: BOOKED, starting in (now, now + 1 h].
const remindersHourWindow = `a.status = 'BOOKED'
      AND a.start_at > @now::timestamptz
      AND a.start_at <= @now::timestamptz + interval '1 hour'`

// remindersHourTooLate: BOOKED, started in (now - 15 min, now], booked before its start.
const remindersHourTooLate = `a.status = 'BOOKED'
  AND a.start_at > @now::timestamptz - interval '15 minutes'
  AND a.start_at <= @now::timestamptz
  AND a.booked_at < a.start_at`
