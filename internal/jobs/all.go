// Package jobs holds the business jobs the scheduler runs, one file each, the message
// pipeline the sending ones share, and Builtin, the list of them a replica runs. A job body
// is written so that two copies running at once are still correct: it streams its entities
// in bounded batches (job.Walk), takes a per-entity transaction-level advisory lock with
// try-lock-and-skip, guards every transition by the current state, and writes only through
// the run's fenced transaction. The jobs implement the contract of internal/job; the engine
// never imports this package: the replica builds the jobs and hands them to it.
package jobs

import (
	"log/slog"

	"github.com/schedulerhq/scheduler/internal/job"
)

// Builtin returns the registry of the jobs a replica runs, in the order of the job table
// in docs/design.md.
func Builtin(s Settings, log *slog.Logger) *job.Registry {
	// One pipeline for every job that sends, so that the concurrency bound and the
	// provider's rate hold for all of them together.
	pipeline := NewPipeline(NewSender(s.Sender, log), s.Send)
	return job.NewRegistry(
		NewPlanChange(),
		NewStatusSync(),
		NewRoundsCreate(),
		NewRoundsOpen(),
		NewRoundsClose(),
		NewAbandonRecovery(s.Abandon, pipeline),
		NewDataRetention(s.Retention),
		NewAppointmentConfirmations(s.Appointments, pipeline),
		NewAppointmentRemindersDay(s.Appointments, pipeline),
		NewAppointmentRemindersHour(s.Appointments, pipeline),
		NewAppointmentStartNotifications(s.Appointments, pipeline),
		NewNoShowDetection(s.Appointments),
		NewNoShowRecovery(s.Appointments, pipeline),
		NewNoShowRate(s.Appointments, pipeline),
	)
}
