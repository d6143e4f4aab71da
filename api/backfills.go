package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/schedulerhq/scheduler/client"
	"github.com/schedulerhq/scheduler/internal/httpx"
	"github.com/schedulerhq/scheduler/internal/namespace"
	"github.com/schedulerhq/scheduler/internal/store"
)

// Re-runs and backfills: a slot done again under its own scheduled_at and Idempotency-Key,
// so a target that deduplicates by the key decides whether to apply it again.

// maxBackfillSlots caps one backfill; a wider one is refused with what to narrow.
const maxBackfillSlots = 1000

func newBackfillView(b store.Backfill) client.Backfill {
	ns, name := namespace.Split(b.Job)
	slots := make([]time.Time, len(b.Slots))
	for i, t := range b.Slots {
		slots[i] = t.UTC()
	}
	return client.Backfill{ID: b.ID, Job: name, Namespace: ns, Since: b.Since.UTC(), Until: b.Until.UTC(), Only: b.Only,
		Slots: slots, Done: b.Next, RunID: b.RunID, State: b.State, CreatedAt: b.CreatedAt.UTC(), UpdatedAt: b.UpdatedAt.UTC()}
}

// backfillRequest is POST …/jobs/{name}/backfill's body.
type backfillRequest struct {
	Since  *time.Time `json:"since"`
	Until  *time.Time `json:"until"`
	Only   string     `json:"only"`
	DryRun bool       `json:"dry_run"`
	Reason *string    `json:"reason"`
}

// chosen reports whether a backfill of only takes a slot whose newest row says v. A slot a
// backfill or a re-run already did again is left alone unless it failed again, so a second
// identical backfill does nothing new.
func chosen(only string, v slotView) bool {
	failed := v.Outcome == store.StatusFailed || v.Outcome == store.StatusTimedOut || v.Outcome == store.StatusAbandoned
	switch only {
	case "missed":
		return v.Outcome == store.StatusMissed || v.Outcome == slotUnrecorded
	case "failed":
		return failed
	}
	redone := v.trigger == store.TriggerBackfill || v.trigger == store.TriggerRerun
	return v.Outcome != slotPending && v.Outcome != store.StatusQueued && v.Outcome != store.StatusRunning && (!redone || failed)
}

// backfillJob runs again a window's slots of a job, chosen by only (POST
// …/jobs/{name}/backfill): 202 with the backfill made; a dry run (or nothing to run)
// answers 200 with the slots that would run, and makes none.
func (s *Server) backfillJob(w http.ResponseWriter, r *http.Request) {
	j := s.jobToActOn(w, r)
	if j == nil {
		return
	}
	req, reason, now, ok := readBackfill(w, r)
	if !ok {
		return
	}
	since, until := req.Since.UTC(), req.Until.UTC()
	slots, ok := s.backfillSlots(w, r, j, req.Only, since, until, now)
	if !ok {
		return
	}
	ns, name := namespace.Split(j.conf.Name)
	if req.DryRun || len(slots) == 0 {
		// Nothing to run (a second identical backfill) is answered as a dry run is: what
		// would run, and no backfill made.
		httpx.WriteJSON(w, http.StatusOK, map[string]any{"id": nil, "job": name, "namespace": ns, "slots": slots, "dry_run": req.DryRun})
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), queryTimeout)
	defer cancel()
	b := store.Backfill{Job: j.conf.Name, Since: since, Until: until, Only: req.Only, Slots: slots}
	view, err := s.createBackfill(ctx, r, b, reason)
	switch {
	case errors.Is(err, store.ErrBackfillRunning):
		httpx.WriteProblem(w, r, http.StatusConflict, probBackfillRunning, fmt.Sprintf(
			"a backfill of %s is running; wait for it (GET /v1/backfills) or cancel it", name))
		return
	case err != nil:
		s.databaseProblem(w, r, err)
		return
	}
	s.cfg.Log.InfoContext(ctx, "backfill asked for", "job", j.conf.Name, "backfill_id", view.ID, "slots", len(slots), "request_id", httpx.RequestID(ctx))
	w.Header().Set("Location", fmt.Sprintf("/v1/backfills/%d", view.ID))
	httpx.WriteJSON(w, http.StatusAccepted, view)
}

// readBackfill reads a backfill's body and its reason, or answers 400 (the body, the
// reason) or 422 (every wrong field at once). Since and Until are then set, and Only; now
// is the time until was checked against, once the body was read.
func readBackfill(w http.ResponseWriter, r *http.Request) (req backfillRequest, reason *string, now time.Time, ok bool) {
	body, ok := httpx.ReadBody(w, r)
	if !ok {
		return req, nil, now, false
	}
	if body != nil && !httpx.DecodeStrict(w, r, body, &req) {
		return req, nil, now, false
	}
	now = time.Now().UTC().Truncate(time.Second)
	fields := req.check(now)
	if reason, ok = checkReason(w, r, req.Reason); !ok {
		return req, nil, now, false
	}
	if len(fields) > 0 {
		httpx.WriteProblem(w, r, http.StatusUnprocessableEntity, httpx.ProbInvalidRequest, "the backfill has problems; see errors", fields...)
		return req, nil, now, false
	}
	return req, reason, now, true
}

// check lists the request's wrong fields, and sets Only's default (missed).
func (req *backfillRequest) check(now time.Time) []client.FieldError {
	var fields []client.FieldError
	if req.Since == nil {
		fields = append(fields, client.FieldError{Field: "since", Detail: "required: the first slot time to look at (RFC 3339)"})
	}
	if req.Until == nil {
		fields = append(fields, client.FieldError{Field: "until", Detail: "required: the last slot time to look at (RFC 3339), at most now"})
	} else if req.Until.After(now) {
		fields = append(fields, client.FieldError{Field: "until", Detail: "must not be in the future: a backfill runs slots that are due"})
	}
	if req.Since != nil && req.Until != nil && !req.Since.Before(*req.Until) {
		fields = append(fields, client.FieldError{Field: "since", Detail: "must be before until"})
	}
	switch req.Only {
	case "":
		req.Only = "missed"
	case "missed", "failed", "all":
	default:
		fields = append(fields, client.FieldError{Field: "only", Detail: fmt.Sprintf("%q: want missed (the default), failed or all", req.Only)})
	}
	return fields
}

// backfillSlots are the window's slots that only chooses, oldest first (the order they
// run in; never nil), or it answers 422 when there are more than a backfill runs.
func (s *Server) backfillSlots(w http.ResponseWriter, r *http.Request, j *jobRef, only string, since, until, now time.Time) ([]time.Time, bool) {
	views, ok := s.slotViews(w, r, j, since, until, now)
	if !ok {
		return nil, false
	}
	slots := []time.Time{}
	for i := len(views) - 1; i >= 0; i-- {
		if chosen(only, views[i]) {
			slots = append(slots, views[i].ScheduledAt)
		}
	}
	if len(slots) > maxBackfillSlots {
		httpx.WriteProblem(w, r, http.StatusUnprocessableEntity, httpx.ProbInvalidRequest, fmt.Sprintf(
			"%d slots would be run; a backfill runs at most %d: narrow since and until", len(slots), maxBackfillSlots),
			client.FieldError{Field: "since", Detail: "too many slots"})
		return nil, false
	}
	return slots, true
}

// createBackfill stores backfill b with its audit row, in one transaction.
func (s *Server) createBackfill(ctx context.Context, r *http.Request, b store.Backfill, reason *string) (client.Backfill, error) {
	var view client.Backfill
	err := s.cfg.DB.Atomically(ctx, func(ex store.Executor) error {
		created, err := ex.CreateBackfill(ctx, b)
		if err != nil {
			return err
		}
		view = newBackfillView(created)
		a := s.action(r, store.ActionBackfill, b.Job, reason)
		a.Detail, _ = json.Marshal(map[string]any{"backfill_id": created.ID, "since": b.Since, "until": b.Until, "only": b.Only, "slots": len(b.Slots)})
		return ex.RecordAction(ctx, a)
	})
	return view, err
}

// backfill reads {id}, checking that the caller may read (or, with edit, change) its job's
// namespace; it answers and returns false otherwise.
func (s *Server) backfill(w http.ResponseWriter, r *http.Request, edit bool) (store.Backfill, bool) {
	id, err := strconv.ParseInt(chi.URLParam(r, "id"), 10, 64)
	if err != nil || id <= 0 {
		httpx.FieldProblem(w, r, httpx.ProbInvalidRequest, "id", "a backfill id is a positive integer")
		return store.Backfill{}, false
	}
	ctx, cancel := context.WithTimeout(r.Context(), queryTimeout)
	defer cancel()
	b, err := s.cfg.DB.Backfill(ctx, id)
	p := principal(r.Context())
	switch {
	case errors.Is(err, store.ErrBackfillNotFound), err == nil && !p.CanRead(namespace.Of(b.Job)):
		// Another namespace's backfill is answered as a missing one (runNotFound says why).
		httpx.WriteProblem(w, r, http.StatusNotFound, probNotFound, fmt.Sprintf("no backfill with id %d", id))
		return b, false
	case err != nil:
		s.databaseProblem(w, r, err)
		return b, false
	}
	ns := namespace.Of(b.Job)
	_, builtin := s.jobs[b.Job]
	if edit && (!p.CanEdit(ns) || builtin && !p.CanActOnBuiltin()) {
		s.forbid(w, r, fmt.Sprintf("cancel backfill %d of job %s", id, b.Job))
		return b, false
	}
	return b, true
}

func (s *Server) getBackfill(w http.ResponseWriter, r *http.Request) {
	if b, ok := s.backfill(w, r, false); ok {
		httpx.WriteJSON(w, http.StatusOK, newBackfillView(b))
	}
}

// cancelBackfill stops a running backfill and cancels the run it queued last.
func (s *Server) cancelBackfill(w http.ResponseWriter, r *http.Request) {
	b, ok := s.backfill(w, r, true)
	if !ok {
		return
	}
	reason, ok := actionReason(w, r)
	if !ok {
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), queryTimeout)
	defer cancel()
	err := s.cfg.DB.Atomically(ctx, func(ex store.Executor) error {
		ended, err := ex.EndBackfill(ctx, b.ID, store.BackfillCancelled)
		if err != nil {
			return err
		}
		b = ended
		if b.RunID != nil {
			if _, _, err := ex.CancelRun(ctx, *b.RunID); err != nil && !errors.Is(err, store.ErrRunNotFound) {
				return err
			}
		}
		a := s.action(r, store.ActionBackfillCancel, b.Job, reason)
		a.RunID = b.RunID
		a.Detail, _ = json.Marshal(map[string]any{"backfill_id": b.ID})
		return ex.RecordAction(ctx, a)
	})
	switch {
	case errors.Is(err, store.ErrBackfillNotFound):
		httpx.WriteProblem(w, r, http.StatusConflict, probBackfillEnded, fmt.Sprintf("backfill %d has already ended (%s)", b.ID, b.State))
		return
	case err != nil:
		s.databaseProblem(w, r, err)
		return
	}
	httpx.WriteJSON(w, http.StatusOK, newBackfillView(b))
}

// rerunRun queues the slot of run {id} again (202): same scheduled_at, same Idempotency-Key.
func (s *Server) rerunRun(ctx context.Context, q *runAction) (*runAnswer, error) {
	id, r, reason := q.id, q.r, q.reason
	run, err := s.runToActOn(ctx, r, id, "re-run")
	if err != nil {
		return nil, err
	}
	if run.ScheduledAt == nil {
		return nil, httpx.Problem(http.StatusConflict, probRunNotASlot, fmt.Sprintf(
			"run %d did no slot (a %s run); trigger the job again instead (POST %s/runs)", id, run.Trigger, jobPath(run.Job)))
	}
	var queued *store.Run
	var created bool
	err = s.cfg.DB.Atomically(ctx, func(ex store.Executor) error {
		var err error
		queued, created, err = ex.QueueSlotRun(ctx, run.Job, *run.ScheduledAt, store.TriggerRerun, reason, nil)
		if err != nil || !created {
			return err
		}
		a := s.action(r, store.ActionRerun, run.Job, reason)
		a.RunID = &queued.ID
		a.Detail, _ = json.Marshal(map[string]any{"reruns_run_id": id, "scheduled_at": run.ScheduledAt.UTC()})
		return ex.RecordAction(ctx, a)
	})
	switch {
	case errors.Is(err, store.ErrSlotTooOld):
		return nil, httpx.Problem(http.StatusConflict, probRunNotASlot, fmt.Sprintf(
			"run %d's slot (%s) is older than the run history's retention; it cannot be recorded again", id, run.ScheduledAt.UTC().Format(time.RFC3339)))
	case err != nil:
		return nil, err
	case !created:
		return nil, httpx.Problem(http.StatusConflict, probJobBusy, fmt.Sprintf(
			"job %s has an active run (%d, %s); re-run the slot once it has ended", run.Job, queued.ID, queued.Status))
	}
	s.cfg.Log.InfoContext(ctx, "slot re-run queued", "job", run.Job, "run_id", queued.ID, "reruns_run_id", id,
		"scheduled_at", run.ScheduledAt, "request_id", httpx.RequestID(ctx))
	return &runAnswer{Run: *newRunView(queued), status: http.StatusAccepted, location: fmt.Sprintf("/v1/runs/%d", queued.ID)}, nil
}
