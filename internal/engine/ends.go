package engine

import (
	"github.com/schedulerhq/scheduler/internal/runend"
)

// The ends of runs, the engine's part: every end the leader records (the finisher, the
// callback watch) is written by the store's one end statement and read by runend.Record in
// the same fenced transaction, with the rules of the job as this leader loaded it. A
// callback's completion on any replica's API goes through the same two (api/callbacks.go).

// endRules is what the entry's job says about its runs' ends: its notification rules, and a
// runtime job's pause_after_failures (a built-in job is never paused automatically).
func (en *entry) endRules() runend.Rules {
	r := runend.Rules{Notify: en.notifyOn()}
	if en.def != nil {
		r.PauseAfterFailures = en.def.Def.PauseAfterFailures
	}
	return r
}

// rulesOf is endRules of job, none for a job this leader does not know (deleted since).
func (e *Engine) rulesOf(job string) runend.Rules {
	if en := e.entry(job); en != nil {
		return en.endRules()
	}
	return runend.Rules{}
}

// jobsPaused reports the jobs that ends paused, once their transaction committed.
func (e *Engine) jobsPaused(paused []runend.Paused) {
	for _, p := range paused {
		e.conf.Metrics.SetJobPaused(p.Job, true)
		e.log.Warn("job paused after failed runs in a row", "job", p.Job, "run_id", p.RunID, "pause_after_failures", p.After)
	}
}
