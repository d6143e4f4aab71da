package engine

import (
	"context"
	"log/slog"
)

// loadJobHistories sets the job gauges from the database, so a new leader reports the
// cluster's last successes instead of only its own, and a job paused before the election
// reads as paused rather than stuck.
func (e *Engine) loadJobHistories(ctx context.Context, log *slog.Logger) {
	if e.conf.Metrics == nil {
		return
	}
	names := make([]string, 0, len(e.conf.Jobs))
	for _, jc := range e.conf.Jobs {
		names = append(names, jc.Name)
	}
	e.runtimeMu.RLock()
	for name := range e.runtime {
		names = append(names, name)
	}
	e.runtimeMu.RUnlock()
	histories, err := e.conf.DB.JobHistories(ctx, names)
	if err != nil {
		if ctx.Err() == nil {
			log.Warn("reading the jobs' last successes failed; the job gauges show only this term's runs", "error", err)
		}
		return
	}
	for _, h := range histories {
		e.conf.Metrics.SetLastSuccess(h.Job, h.LastSuccess)
		e.conf.Metrics.SetJobPaused(h.Job, h.Paused)
	}
}
