package engine

import (
	"context"
	"log/slog"
	"time"
)

// The slot audit checks guarantee 10 while a term lasts: every slot a job's schedule names
// has a row a minute after its time. Slots before the term are the election's catch-up's
// (which records at most 100 missed slots a job by design), so the audit starts at the
// term's start. A slot it finds without a row is logged at ERROR and counted in
// scheduler_slots_unrecorded_total, which the SchedulerSlotUnrecorded alert watches; the
// slots view (GET …/jobs/{name}/slots) shows it as unrecorded.

// The slot audit's defaults (Config.SlotAuditInterval, Config.SlotAuditGrace).
const (
	slotAuditIntervalDefault = time.Minute
	slotAuditGraceDefault    = time.Minute
)

// maxAuditedSlots bounds one job's slots in one audit (a job on "@every 1s" names 60 a
// minute); past it the audit looks at the newest only.
const maxAuditedSlots = 600

// slotAuditor is the leader service that audits every interval until the term ends. A slot
// may be without its row for grace: claims commit within milliseconds, and a tick waits out
// a database outage within its period.
type slotAuditor struct {
	e               *Engine
	log             *slog.Logger
	interval, grace time.Duration
}

func (a *slotAuditor) run(ctx context.Context) {
	checkedTo := time.Now()
	ticker := time.NewTicker(a.interval)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
		to := time.Now().Add(-a.grace).Truncate(time.Second)
		if !to.After(checkedTo) {
			continue
		}
		if a.pass(ctx, checkedTo, to) {
			checkedTo = to
		}
	}
}

// pass checks the slots after from and up to to of every enabled job, and reports whether
// it could (a failed read is tried again, over the same window, next time). It ends with
// the slotAudit test signal, carrying how many jobs' slots it read.
func (a *slotAuditor) pass(ctx context.Context, from, to time.Time) bool {
	e, log := a.e, a.log
	expected := map[string][]time.Time{}
	var jobs []string
	for _, en := range e.enabledEntries() {
		start := from
		if en.since.After(start) {
			start = en.since // the slots before belong to an earlier definition
		}
		var slots []time.Time
		spent := en.spentSince() // after the job's max_runs ran, no slot is due
		for t := en.conf.Schedule.Next(start); !t.IsZero() && !t.After(to) && (spent.IsZero() || t.Before(spent)); t = en.conf.Schedule.Next(t) {
			slots = append(slots, t)
			if len(slots) > maxAuditedSlots {
				slots = slots[1:]
			}
		}
		if len(slots) > 0 {
			expected[en.conf.Name] = slots
			jobs = append(jobs, en.conf.Name)
		}
	}
	if len(jobs) == 0 {
		e.testSignals.slotAudit.Send(0)
		return true
	}
	recorded, err := e.conf.DB.RecordedSlots(ctx, jobs, from, to)
	if err != nil {
		if ctx.Err() == nil {
			log.Warn("the slot audit could not read the recorded slots; it tries again", "error", err)
		}
		return false
	}
	for _, job := range jobs {
		var missing []time.Time
		for _, t := range expected[job] {
			if !recorded[job][t] {
				missing = append(missing, t)
			}
		}
		if len(missing) > 0 {
			e.conf.Metrics.SlotsUnrecorded(job, len(missing))
			log.Error("due slots have no row (guarantee 10); see GET /v1/jobs/{name}/slots and report it",
				"job", job, "count", len(missing), "first", missing[0], "last", missing[len(missing)-1])
		}
	}
	e.testSignals.slotAudit.Send(len(jobs))
	return true
}
