package jobs

import (
	"time"

	"github.com/schedulerhq/scheduler/internal/jobcontract"
)

// AppointmentStartNotifications tells the host of each BOOKED appointment, by email to
// host_email, that it has started: once per appointment whose start has come, at most 15
// minutes before now (the run's clock). Exactly once per appointment, never for a cancelled
// one (see appointments.go).
//
// Backlog: a start notice more than 15 minutes after the start is stale (no-show-detection
// takes over from there), so it is never sent late. The appointments whose notice window
// closed during the last 15 minutes (the job's period) without one are counted as too_late.
type AppointmentStartNotifications struct{ appointmentMessages }

// NewAppointmentStartNotifications returns the appointment-start-notifications job.
func NewAppointmentStartNotifications(s AppointmentSettings, pipe *Pipeline) jobcontract.Job {
	return &AppointmentStartNotifications{newAppointmentMessages(appointmentJob{
		name:     "appointment-start-notifications",
		kind:     "appointment-start-notification",
		defaults: jobcontract.Defaults{Schedule: "*/15 * * * *", Timeout: 3 * time.Minute},
		keyset:   "start_at",
		window:   startNotificationsWindow,
		to:       toHost,
		tooLate:  startNotificationsTooLate,
	}, s, pipe)}
}

// startNotificationsWindow: BOOKED, started in [now - 15 min, now].
const startNotificationsWindow = `a.status = 'BOOKED'
      AND a.start_at >= @now::timestamptz - interval '15 minutes'
      AND a.start_at <= @now::timestamptz`

// startNotificationsTooLate: started in [now - 30 min, now - 15 min), still BOOKED or
// already moved to NO_SHOW by no-show-detection (each along its partial index).
const startNotificationsTooLate = `(a.status = 'BOOKED' OR a.status = 'NO_SHOW')
  AND a.start_at >= @now::timestamptz - interval '30 minutes'
  AND a.start_at < @now::timestamptz - interval '15 minutes'`
