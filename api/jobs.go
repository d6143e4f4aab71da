package api

import (
	"context"
	"fmt"
	"net/http"

	"github.com/go-chi/chi/v5"

	"github.com/schedulerhq/scheduler/internal/config"
	"github.com/schedulerhq/scheduler/internal/store"
)

// job returns the {name} job, or answers 404 and returns nil.
func (s *Server) job(w http.ResponseWriter, r *http.Request) *config.Job {
	name := chi.URLParam(r, "name")
	j, ok := s.jobs[name]
	if !ok {
		writeProblem(w, r, http.StatusNotFound, probJobNotFound,
			fmt.Sprintf("no job named %q; GET /v1/jobs lists them", name), FieldError{Field: "name", Detail: "unknown job"})
		return nil
	}
	return j
}

func (s *Server) listJobs(w http.ResponseWriter, r *http.Request) {
	views, err := s.jobViews(r.Context(), s.cfg.Jobs...)
	if err != nil {
		s.databaseProblem(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"jobs": views})
}

func (s *Server) getJob(w http.ResponseWriter, r *http.Request) {
	j := s.job(w, r)
	if j == nil {
		return
	}
	s.writeJob(w, r, j)
}

func (s *Server) pauseJob(w http.ResponseWriter, r *http.Request)  { s.setPaused(w, r, true) }
func (s *Server) resumeJob(w http.ResponseWriter, r *http.Request) { s.setPaused(w, r, false) }

// setPaused persists the flag in job_settings, where every replica and the next leader read
// it; the leader stops (or resumes) the job's scheduled runs. Manual triggers still work on
// a paused job.
func (s *Server) setPaused(w http.ResponseWriter, r *http.Request, paused bool) {
	j := s.job(w, r)
	if j == nil {
		return
	}
	reason, ok := actionReason(w, r)
	if !ok {
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), queryTimeout)
	defer cancel()
	action := store.ActionResume
	if paused {
		action = store.ActionPause
	}
	err := s.cfg.DB.Atomically(ctx, func(ex store.Executor) error {
		if err := ex.SetPaused(ctx, j.Name, paused); err != nil {
			return err
		}
		return ex.RecordAction(ctx, s.action(r, action, j.Name, reason))
	})
	if err != nil {
		s.databaseProblem(w, r, err)
		return
	}
	s.cfg.Log.InfoContext(ctx, "job paused flag set", "job", j.Name, "paused", paused, "request_id", requestID(ctx))
	s.writeJob(w, r, j)
}

func (s *Server) writeJob(w http.ResponseWriter, r *http.Request, j *config.Job) {
	views, err := s.jobViews(r.Context(), *j)
	if err != nil {
		s.databaseProblem(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, views[0])
}

func (s *Server) jobViews(ctx context.Context, list ...config.Job) ([]Job, error) {
	ctx, cancel := context.WithTimeout(ctx, queryTimeout)
	defer cancel()
	names := make([]string, len(list))
	for i, j := range list {
		names[i] = j.Name
	}
	now, paused, last, err := s.cfg.DB.JobStates(ctx, names)
	if err != nil {
		return nil, err
	}
	views := make([]Job, len(list))
	for i := range list {
		views[i] = newJobView(&list[i], now, paused[list[i].Name], last[list[i].Name])
	}
	return views, nil
}
