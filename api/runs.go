package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/schedulerhq/scheduler/client"
	"github.com/schedulerhq/scheduler/internal/httpx"
	"github.com/schedulerhq/scheduler/internal/namespace"
	"github.com/schedulerhq/scheduler/internal/store"
)

const (
	limitDefault = 50
	limitMax     = 500
)

var (
	runStatuses = []string{store.StatusQueued, store.StatusRunning, store.StatusSucceeded, store.StatusFailed,
		store.StatusSkipped, store.StatusTimedOut, store.StatusAbandoned, store.StatusCancelled, store.StatusMissed}
	runTriggers = []string{store.TriggerSchedule, store.TriggerManual, store.TriggerCatchUp, store.TriggerRecovery, store.TriggerRerun, store.TriggerBackfill, store.TriggerAfter}
)

func (s *Server) listRuns(w http.ResponseWriter, r *http.Request) {
	name, ok := s.jobWithHistory(w, r)
	if !ok {
		return
	}
	q, ok := httpx.QueryParams(w, r)
	if !ok {
		return
	}
	f := store.RunFilter{Job: name, Status: q.Get("status"), Trigger: q.Get("trigger"), Limit: limitDefault}
	if f.Status != "" && !slices.Contains(runStatuses, f.Status) {
		httpx.FieldProblem(w, r, httpx.ProbInvalidRequest, "status", fmt.Sprintf("status must be one of %s; got %q", strings.Join(runStatuses, ", "), f.Status))
		return
	}
	if f.Trigger != "" && !slices.Contains(runTriggers, f.Trigger) {
		httpx.FieldProblem(w, r, httpx.ProbInvalidRequest, "trigger", fmt.Sprintf("trigger must be one of %s; got %q", strings.Join(runTriggers, ", "), f.Trigger))
		return
	}
	for _, p := range []struct {
		name string
		dst  **time.Time
	}{{"since", &f.Since}, {"until", &f.Until}} {
		v := q.Get(p.name)
		if v == "" {
			continue
		}
		t, err := time.Parse(time.RFC3339Nano, v)
		if err != nil {
			httpx.FieldProblem(w, r, httpx.ProbInvalidRequest, p.name, fmt.Sprintf("%s must be an RFC 3339 time such as 2025-01-31T02:00:00Z; got %q", p.name, v))
			return
		}
		*p.dst = &t
	}
	if f.Since != nil && f.Until != nil && f.Since.After(*f.Until) {
		httpx.FieldProblem(w, r, httpx.ProbInvalidRequest, "since", fmt.Sprintf("since (%s) is later than until (%s); the range would be empty",
			f.Since.Format(time.RFC3339Nano), f.Until.Format(time.RFC3339Nano)))
		return
	}
	if f.Limit, ok = httpx.QueryLimit(w, r, q, limitDefault, limitMax); !ok {
		return
	}
	fp := filterFingerprint(f)
	if v := q.Get("cursor"); v != "" {
		id, ok := decodeCursor(v, fp)
		if !ok {
			httpx.FieldProblem(w, r, probInvalidCursor, "cursor", "cursor must be a next_cursor returned by this same query (same job and filters)")
			return
		}
		f.BeforeID = id
	}

	ctx, cancel := context.WithTimeout(r.Context(), queryTimeout)
	defer cancel()
	page := f
	page.Limit++ // one more tells whether there is a next page
	runs, err := s.cfg.DB.ListRuns(ctx, page)
	if err != nil {
		s.databaseProblem(w, r, err)
		return
	}
	var next *string
	if len(runs) > f.Limit {
		runs = runs[:f.Limit]
		c := encodeCursor(runs[len(runs)-1].ID, fp)
		next = &c
	}
	answer := client.RunPage{Runs: make([]client.Run, len(runs)), NextCursor: next}
	for i, run := range runs {
		answer.Runs[i] = *newRunView(run)
	}
	httpx.WriteJSON(w, http.StatusOK, answer)
}

// jobWithHistory returns {name} when a job has that name, or had it: a deleted runtime
// job's runs stay listed under its name. It answers 404 for a name no job and no run has.
func (s *Server) jobWithHistory(w http.ResponseWriter, r *http.Request) (string, bool) {
	name := chi.URLParam(r, "name")
	j, err := s.findJob(r.Context(), routeNamespace(r), name)
	if err != nil {
		s.databaseProblem(w, r, err)
		return "", false
	}
	if j != nil {
		return j.conf.Name, true
	}
	if namespace.Valid(name) {
		key := namespace.Key(routeNamespace(r), name)
		ctx, cancel := context.WithTimeout(r.Context(), queryTimeout)
		defer cancel()
		runs, err := s.cfg.DB.ListRuns(ctx, store.RunFilter{Job: key, Limit: 1})
		if err != nil {
			s.databaseProblem(w, r, err)
			return "", false
		}
		if len(runs) > 0 {
			return key, true
		}
	}
	jobNotFound(w, r, name)
	return "", false
}

// runID parses {id}, or answers 400 and returns 0.
func runID(w http.ResponseWriter, r *http.Request) int64 {
	id, p := parseRunID(r)
	if p != nil {
		httpx.WriteProblemFor(w, r, p)
	}
	return id
}

// runRoute is a /v1/runs/{id} route's request: the run's id.
type runRoute struct{ id int64 }

// Extract reads the id, or refuses it (400).
func (q *runRoute) Extract(r *http.Request) error {
	id, p := parseRunID(r)
	if p != nil {
		return p
	}
	q.id = id
	return nil
}

func parseRunID(r *http.Request) (int64, *client.Problem) {
	v := chi.URLParam(r, "id")
	id, err := strconv.ParseInt(v, 10, 64)
	if err != nil || id <= 0 {
		detail := fmt.Sprintf("a run id is a positive integer; got %q", v)
		return 0, httpx.Problem(http.StatusBadRequest, httpx.ProbInvalidRequest, detail, client.FieldError{Field: "id", Detail: detail})
	}
	return id, nil
}

func (s *Server) getRun(ctx context.Context, q *runRoute) (*client.Run, error) {
	run, err := s.cfg.DB.Run(ctx, q.id)
	switch {
	case errors.Is(err, store.ErrRunNotFound), err == nil && !principal(ctx).CanRead(namespace.Of(run.Job)):
		return nil, runNotFoundProblem(q.id)
	case err != nil:
		return nil, err
	}
	attempts, err := s.cfg.DB.Attempts(ctx, run.ID)
	if err != nil {
		return nil, err
	}
	v := newRunView(run)
	v.Attempts = newAttemptViews(attempts)
	if v.Output, err = s.cfg.DB.RunOutput(ctx, run.ID); err != nil {
		return nil, err
	}
	if v.ParentRunIDs, v.CausedRunIDs, err = s.cfg.DB.RunLinks(ctx, run.ID); err != nil {
		return nil, err
	}
	return v, nil
}

// runNotFoundProblem is the 404 of a run id that names no run the caller may read: a run of a
// namespace the caller cannot read gets this same answer, so that another team's ids
// cannot be told from ids that were never used (docs/design.md, "What one team learns of another").
func runNotFoundProblem(id int64) *client.Problem {
	return httpx.Problem(http.StatusNotFound, probRunNotFound, fmt.Sprintf("no run with id %d", id))
}

// runToActOn reads the run an action (verb: "cancel", "re-run") names, for a caller who
// may edit its job, and answers 404 or 403 itself (nil then). Who may act depends on the
// run's job, so the run is read first; its job never changes. A run the caller may not even
// read is missing to it (runNotFound).
func (s *Server) runToActOn(ctx context.Context, r *http.Request, id int64, verb string) (*store.Run, error) {
	run, err := s.cfg.DB.Run(ctx, id)
	p := principal(r.Context())
	switch {
	case errors.Is(err, store.ErrRunNotFound), err == nil && !p.CanRead(namespace.Of(run.Job)):
		return nil, runNotFoundProblem(id)
	case err != nil:
		return nil, err
	}
	if _, builtin := s.jobs[run.Job]; builtin && !p.CanActOnBuiltin() || !p.CanEdit(namespace.Of(run.Job)) {
		return nil, s.forbidden(r, fmt.Sprintf("%s run %d of job %s", verb, id, run.Job))
	}
	return run, nil
}

// runAction is the request of an action on /v1/runs/{id}: the id, then the optional reason.
type runAction struct {
	runRoute
	reasonRequest
}

// Extract reads the id (400 before the body is read) and keeps the request.
func (q *runAction) Extract(r *http.Request) error {
	if err := q.runRoute.Extract(r); err != nil {
		return err
	}
	return q.reasonRequest.Extract(r)
}

// runAnswer is a run an action answers, with the action's status and, for a run it
// queued, its Location.
type runAnswer struct {
	client.Run
	status   int
	location string
}

// StatusCode is the action's status.
func (a *runAnswer) StatusCode() int { return a.status }

// SetHeader names the queued run.
func (a *runAnswer) SetHeader(h http.Header) {
	if a.location != "" {
		h.Set("Location", a.location)
	}
}

// cancelRun cancels a queued run at once (200), or asks the leader to cancel a running one
// (202: the engine cancels the run's context and records the outcome).
func (s *Server) cancelRun(ctx context.Context, q *runAction) (*runAnswer, error) {
	id, r, reason := q.id, q.r, q.reason
	run, err := s.runToActOn(ctx, r, id, "cancel")
	if err != nil {
		return nil, err
	}
	var outcome store.CancelOutcome
	err = s.cfg.DB.Atomically(ctx, func(ex store.Executor) error {
		var err error
		if run, outcome, err = ex.CancelRun(ctx, id); err != nil || outcome == store.CancelTooLate {
			return err
		}
		a := s.action(r, store.ActionCancel, run.Job, reason)
		a.RunID = &run.ID
		return ex.RecordAction(ctx, a)
	})
	switch {
	case errors.Is(err, store.ErrRunNotFound):
		return nil, runNotFoundProblem(id)
	case err != nil:
		return nil, err
	case outcome == store.CancelTooLate:
		return nil, httpx.Problem(http.StatusConflict, probRunFinished,
			fmt.Sprintf("run %d already finished with status %s; there is nothing to cancel", id, run.Status))
	}
	s.cfg.Log.InfoContext(ctx, "run cancel", "run_id", run.ID, "job", run.Job, "status", run.Status,
		"cancel_requested", run.CancelRequested, "request_id", httpx.RequestID(ctx))
	status := http.StatusOK
	if outcome == store.CancelRequested {
		status = http.StatusAccepted
	}
	return &runAnswer{Run: *newRunView(run), status: status}, nil
}
