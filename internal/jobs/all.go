package jobs

import "log/slog"

// Builtin returns the registry of the jobs a replica runs, in the order of the job table
// in docs/design.md.
func Builtin(s Settings, log *slog.Logger) *Registry {
	// One pipeline for every job that sends, so that the concurrency bound and the
	// provider's rate hold for all of them together.
	pipeline := NewPipeline(NewSender(s.Sender, log), s.Send)
	return NewRegistry(
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
