package api

import (
	"context"
	"slices"
	"time"

	"github.com/schedulerhq/scheduler/internal/namespace"
	"github.com/schedulerhq/scheduler/internal/runtimejob"
	"github.com/schedulerhq/scheduler/internal/store"
)

// parentSlots are a child's slots in [since, until] that come from its parents (`after`):
// the slots its first parent recorded, and those the schedules up its chain of first
// parents name from now on (extract's @every 2s is load's too, through transform; a past
// slot the parent did not record is none of the child's). The parents decide each one
// (internal/store/after.go); until they do it is pending, never unrecorded.
func (s *Server) parentSlots(ctx context.Context, j *jobRef, since, until, now time.Time) ([]time.Time, error) {
	if j.def == nil || len(j.def.After) == 0 {
		return nil, nil
	}
	first := j.def.Parents()[0]
	runs, err := s.cfg.DB.SlotRuns(ctx, first, since, until)
	if err != nil {
		return nil, err
	}
	var slots []time.Time
	for _, r := range runs {
		// A slot the parent skipped or missed runs no child: none of the child's.
		if r.ScheduledAt != nil && r.Status != store.StatusSkipped && r.Status != store.StatusMissed {
			slots = append(slots, r.ScheduledAt.UTC())
		}
	}
	for range runtimejob.MaxChainDepth {
		ns, name := namespace.Split(first)
		p, err := s.findJob(ctx, ns, name)
		if err != nil || p == nil || p.def == nil {
			break // a parent deleted: its children wait, and no slot comes from it
		}
		if len(p.def.Schedule) > 0 && p.conf.Schedule != nil {
			from := since
			if soon := now.Add(-slotGrace); soon.After(from) {
				from = soon
			}
			for t := p.conf.Schedule.Next(from.Add(-time.Second)); !t.IsZero() && !t.After(until) && len(slots) < 2*maxSlots; t = p.conf.Schedule.Next(t) {
				slots = append(slots, t.UTC())
			}
		}
		if len(p.def.After) == 0 {
			break
		}
		first = p.def.Parents()[0]
	}
	slices.SortFunc(slots, func(a, b time.Time) int { return a.Compare(b) })
	return slices.CompactFunc(slots, time.Time.Equal), nil
}

// withParentSlots merges a child's slots from its parents into those of its own schedule,
// in order, and says which came from its parents only.
func withParentSlots(own, fromParents []time.Time) ([]time.Time, map[time.Time]bool) {
	if len(fromParents) == 0 {
		return own, nil
	}
	pending := make(map[time.Time]bool, len(fromParents))
	for _, t := range fromParents {
		pending[t] = true
	}
	for _, t := range own {
		delete(pending, t)
	}
	all := append(slices.Clone(own), fromParents...)
	slices.SortFunc(all, func(a, b time.Time) int { return a.Compare(b) })
	return slices.CompactFunc(all, time.Time.Equal), pending
}

// followsOnly reports a runtime job that runs only after its parents: no schedule of its own.
func (j *jobRef) followsOnly() bool {
	return j.def != nil && len(j.def.Schedule) == 0 && len(j.def.After) > 0
}
