// Package jobs holds the business jobs the scheduler runs, one file each, the message
// pipeline the sending ones share, and Builtin, the list of them a replica runs. A job body
// is written so that two copies running at once are still correct: it streams its entities
// in bounded batches (job.Walk), takes a per-entity transaction-level advisory lock with
// try-lock-and-skip, guards every transition by the current state, and writes only through
// the run's fenced transaction. The jobs implement the contract of internal/jobcontract; the engine
// never imports this package: the replica builds the jobs and hands them to it.
package jobs

import (
	"log/slog"

	"github.com/schedulerhq/scheduler/internal/config"
	"github.com/schedulerhq/scheduler/internal/jobcontract"
)

// Builtin returns the jobs a replica runs, in the order of the job table in docs/design.md:
// built with s, the log sender writing on log, and data-retention dropping through days.
func Builtin(s Settings, log *slog.Logger, days RunDays) []jobcontract.Job {
	// One pipeline for every job that sends, so that the concurrency bound and the
	// provider's rate hold for all of them together.
	pipeline := NewPipeline(NewSender(s.Sender, log), s.Send)
	return []jobcontract.Job{
		NewPlanChange(),
		NewStatusSync(),
		NewRoundsCreate(),
		NewRoundsOpen(),
		NewRoundsClose(),
		NewAbandonRecovery(s.Abandon, pipeline),
		NewDataRetention(s.Retention, days),
		NewAppointmentConfirmations(s.Appointments, pipeline),
		NewAppointmentRemindersDay(s.Appointments, pipeline),
		NewAppointmentRemindersHour(s.Appointments, pipeline),
		NewAppointmentStartNotifications(s.Appointments, pipeline),
		NewNoShowDetection(s.Appointments),
		NewNoShowRecovery(s.Appointments, pipeline),
		NewNoShowRate(s.Appointments, pipeline),
	}
}

// Defaults are the built-in jobs' defaults, named, in the order of Builtin: what
// config.LoadJobs checks the SCHEDULER_JOB_* variables against, before anything is built
// to run. A job's defaults do not depend on its settings.
func Defaults() []config.JobDefaults {
	return jobcontract.NewRegistry(Builtin(Settings{}, slog.New(slog.DiscardHandler), RunDays{})...).Defaults()
}
