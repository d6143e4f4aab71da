package jobs

import "log/slog"

// Builtin returns the registry of the jobs a replica runs, in DESIGN.md's order.
func Builtin(s Settings, log *slog.Logger) *Registry {
	return NewRegistry(
		NewPlanChange(),
		NewStatusSync(),
		NewRoundsCreate(),
		NewRoundsOpen(),
		NewRoundsClose(),
		NewAbandonRecovery(s.Abandon, NewPipeline(NewSender(s.Sender, log), s.Send)),
		NewDataRetention(s.Retention),
	)
}
