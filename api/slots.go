package api

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/schedulerhq/scheduler/client"
	"github.com/schedulerhq/scheduler/internal/httpx"
	"github.com/schedulerhq/scheduler/internal/namespace"
	"github.com/schedulerhq/scheduler/internal/store"
)

// GET …/jobs/{name}/slots: the slots the job's schedule names in a window, each with what
// became of it. Guarantee 10 says every due slot ends with exactly one row; this view is
// where a user checks it, and sees the gaps (missed, skipped) at a glance.

// Slot outcomes besides a run's status.
const (
	slotPending    = "pending"    // not yet due, or due too recently to be claimed yet
	slotUnrecorded = "unrecorded" // due long enough ago and without a row: guarantee 10 broken
)

const (
	// slotGrace is how long after its time a slot without a row is pending rather than
	// unrecorded: the claim commits within milliseconds, a catch-up within an election.
	slotGrace = time.Minute
	// maxSlots bounds one answer; a wider window is refused with what to narrow.
	maxSlots = 5000
	// slotWindowDefault is the window without since.
	slotWindowDefault = 24 * time.Hour
)

// slotView is one slot and what became of it.
type slotView struct {
	ScheduledAt time.Time `json:"scheduled_at"`
	Outcome     string    `json:"outcome"`
	RunID       *int64    `json:"run_id"`
	Reason      *string   `json:"reason"`
	// Runs counts the rows of the slot: more than one after a re-run or a backfill.
	Runs int `json:"runs"`
	// trigger is the newest row's (a backfill chooses by it).
	trigger string
}

func (s *Server) listSlots(w http.ResponseWriter, r *http.Request) {
	j := s.job(w, r)
	if j == nil {
		return
	}
	q, ok := httpx.QueryParams(w, r)
	if !ok {
		return
	}
	now := time.Now().UTC().Truncate(time.Second)
	until, since := now, time.Time{}
	for _, p := range []struct {
		name string
		dst  *time.Time
	}{{"since", &since}, {"until", &until}} {
		if v := q.Get(p.name); v != "" {
			t, err := time.Parse(time.RFC3339Nano, v)
			if err != nil {
				httpx.FieldProblem(w, r, httpx.ProbInvalidRequest, p.name, fmt.Sprintf("%s must be an RFC 3339 time such as 2025-01-31T02:00:00Z; got %q", p.name, v))
				return
			}
			*p.dst = t.UTC()
		}
	}
	if since.IsZero() {
		since = until.Add(-slotWindowDefault)
	}
	if !since.Before(until) {
		httpx.FieldProblem(w, r, httpx.ProbInvalidRequest, "since", "since must be before until")
		return
	}
	views, ok := s.slotViews(w, r, j, since, until, now)
	if !ok {
		return
	}
	counts := map[string]int{}
	for _, v := range views {
		counts[v.Outcome]++
	}
	ns, name := namespace.Split(j.conf.Name)
	httpx.WriteJSON(w, http.StatusOK, map[string]any{"job": name, "namespace": ns, "since": since, "until": until, "slots": views, "counts": counts})
}

// slotViews are the slots j's schedule names from since to until, newest first, each with
// what became of it by now; it answers (422, 503) and returns false when it cannot.
func (s *Server) slotViews(w http.ResponseWriter, r *http.Request, j *jobRef, since, until, now time.Time) ([]slotView, bool) {
	sched := j.conf.Schedule
	if sched == nil {
		return []slotView{}, true
	}
	var slots []time.Time
	for t := sched.Next(since.Add(-time.Second)); !t.IsZero() && !t.After(until); t = sched.Next(t) {
		if len(slots) == maxSlots {
			httpx.WriteProblem(w, r, http.StatusUnprocessableEntity, httpx.ProbInvalidRequest, fmt.Sprintf(
				"the schedule names more than %d slots from %s to %s; narrow the window (since, until)", maxSlots,
				since.Format(time.RFC3339), until.Format(time.RFC3339)), client.FieldError{Field: "since", Detail: "window too wide"})
			return nil, false
		}
		slots = append(slots, t)
	}
	ctx, cancel := context.WithTimeout(r.Context(), queryTimeout)
	defer cancel()
	runs, err := s.cfg.DB.SlotRuns(ctx, j.conf.Name, since, until)
	if err != nil {
		s.databaseProblem(w, r, err)
		return nil, false
	}
	expectedFrom, err := s.expectedFrom(ctx, j)
	if err != nil {
		s.databaseProblem(w, r, err)
		return nil, false
	}
	spentAfter, err := s.spentAfter(ctx, j)
	if err != nil {
		s.databaseProblem(w, r, err)
		return nil, false
	}
	fromParents, err := s.parentSlots(ctx, j, since, until, now)
	if err != nil {
		s.databaseProblem(w, r, err)
		return nil, false
	}
	slots, pending := withParentSlots(slots, fromParents)
	bySlot := make(map[time.Time][]*store.Run, len(runs))
	for _, run := range runs {
		if run.ScheduledAt != nil {
			t := run.ScheduledAt.UTC()
			bySlot[t] = append(bySlot[t], run)
		}
	}
	views := make([]slotView, 0, len(slots))
	for i := len(slots) - 1; i >= 0; i-- {
		t := slots[i]
		v := slotView{ScheduledAt: t}
		switch rows := bySlot[t]; {
		case len(rows) > 0: // the newest row says what became of the slot
			last := rows[0]
			v.Outcome, v.RunID, v.Runs, v.trigger = last.Status, &last.ID, len(rows), last.Trigger
			if last.Status == store.StatusSkipped || last.Status == store.StatusMissed {
				v.Reason = last.Reason
			}
		case pending[t]:
			v.Outcome = slotPending // its parents decide it
		case !spentAfter.IsZero() && t.After(spentAfter):
			continue // after the job's max_runs ran: nothing was due
		case t.After(now.Add(-slotGrace)):
			v.Outcome = slotPending
		case t.Before(expectedFrom) || !j.enabled():
			continue // before the job existed, or while it does not run: nothing was due
		default:
			v.Outcome = slotUnrecorded
		}
		views = append(views, v)
	}
	return views, true
}

// expectedFrom is the time from which the job's slots are due: a runtime job's creation,
// a built-in job's first recorded slot.
func (s *Server) expectedFrom(ctx context.Context, j *jobRef) (time.Time, error) {
	if j.stored != nil {
		return j.stored.CreatedAt, nil
	}
	first, err := s.cfg.DB.FirstSlot(ctx, j.conf.Name)
	if err != nil || first.IsZero() {
		return time.Now(), err // no row yet: nothing past is known to be due
	}
	return first, nil
}

// spentAfter is the last slot that ran of a job whose max_runs ran: no later slot is due.
// Zero while slots are due.
func (s *Server) spentAfter(ctx context.Context, j *jobRef) (time.Time, error) {
	if j.conf.MaxRuns <= 0 {
		return time.Time{}, nil
	}
	ran, err := s.cfg.DB.RanRuns(ctx, []string{j.conf.Name})
	if err != nil || ran[j.conf.Name].Count < int64(j.conf.MaxRuns) {
		return time.Time{}, err
	}
	return ran[j.conf.Name].Last, nil
}
