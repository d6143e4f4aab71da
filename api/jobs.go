package api

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"regexp"

	"github.com/go-chi/chi/v5"

	"github.com/schedulerhq/scheduler/internal/config"
	"github.com/schedulerhq/scheduler/internal/definition"
	"github.com/schedulerhq/scheduler/internal/store"
)

// jobRef is the job a {name} route names: a built-in job, or a runtime job with its stored
// definition.
type jobRef struct {
	conf config.Job
	// stored is a runtime job's row; nil for a built-in job.
	stored *store.StoredDefinition
	// def is the stored definition decoded; nil for a built-in job, or a row that does not
	// decode.
	def *definition.Definition
	// invalid says why a stored definition no longer passes the check (the engine does not
	// run it); empty when it does.
	invalid string
}

// enabled reports whether the job's slots fire and a trigger may run it.
func (j *jobRef) enabled() bool { return j.conf.Enabled && j.invalid == "" }

// runtimeJob is a stored definition as the API shows it, loaded as the engine loads it
// (definition.Load), so the view says what the engine runs.
func runtimeJob(sd store.StoredDefinition) jobRef {
	ref := jobRef{conf: config.Job{Name: sd.Name}, stored: &sd}
	checked, decoded, err := definition.Load(sd.Definition)
	ref.def = decoded
	if decoded != nil {
		ref.conf.Enabled = decoded.IsEnabled()
	}
	if err != nil {
		ref.invalid = err.Error()
		return ref
	}
	ref.conf = checked.Config()
	return ref
}

// runtimeNameRE is internal/definition's rule for a runtime job's name. A {name} that
// breaks it cannot be stored, so it is answered 404 without a query (and a NUL in it never
// reaches PostgreSQL, which would refuse the text with an error).
var runtimeNameRE = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$`)

// job returns the {name} job, built-in or runtime, or answers (404, 503) and returns nil.
func (s *Server) job(w http.ResponseWriter, r *http.Request) *jobRef {
	name := chi.URLParam(r, "name")
	j, err := s.findJob(r.Context(), name)
	switch {
	case err != nil:
		s.databaseProblem(w, r, err)
	case j == nil:
		jobNotFound(w, r, name)
	}
	return j
}

// findJob returns the named job, or nil when no job has the name.
func (s *Server) findJob(ctx context.Context, name string) (*jobRef, error) {
	if j, ok := s.jobs[name]; ok {
		return &jobRef{conf: *j}, nil
	}
	if !runtimeNameRE.MatchString(name) {
		return nil, nil
	}
	ctx, cancel := context.WithTimeout(ctx, queryTimeout)
	defer cancel()
	sd, err := s.cfg.DB.Definition(ctx, name)
	switch {
	case errors.Is(err, store.ErrDefinitionNotFound):
		return nil, nil
	case err != nil:
		return nil, err
	}
	ref := runtimeJob(sd)
	return &ref, nil
}

func jobNotFound(w http.ResponseWriter, r *http.Request, name string) {
	writeProblem(w, r, http.StatusNotFound, probJobNotFound,
		fmt.Sprintf("no job named %q; GET /v1/jobs lists them", name), FieldError{Field: "name", Detail: "unknown job"})
}

// listJobs lists the built-in jobs in configuration order, then the runtime jobs by name;
// with ?limit, one page of them, which the next_cursor of the answer continues. Ten thousand
// runtime jobs make a 12 MB answer that takes 0.4 s; a page reads only its own jobs' state.
func (s *Server) listJobs(w http.ResponseWriter, r *http.Request) {
	q, ok := queryParams(w, r)
	if !ok {
		return
	}
	limit, ok := queryLimit(w, r, q, 0) // 0: every job
	if !ok {
		return
	}
	var after string
	if v := q.Get("cursor"); v != "" {
		name, ok := decodeJobCursor(v)
		if !ok {
			fieldProblem(w, r, probInvalidCursor, "cursor", "cursor must be a next_cursor returned by GET /v1/jobs")
			return
		}
		after = name
	}

	// The built-in jobs the page holds: those after the cursor when it names one, none when
	// it names a runtime job (they come first).
	refs := make([]jobRef, 0, len(s.cfg.Jobs))
	builtinCursor := after == ""
	for _, j := range s.cfg.Jobs {
		if builtinCursor {
			refs = append(refs, jobRef{conf: j})
		}
		if j.Name == after {
			builtinCursor = true
		}
	}
	if _, ok := s.jobs[after]; ok {
		after = "" // the runtime jobs from the first
	}
	ctx, cancel := context.WithTimeout(r.Context(), queryTimeout)
	defer cancel()
	var stored []store.StoredDefinition
	var err error
	if limit == 0 {
		stored, err = s.cfg.DB.DefinitionsAfter(ctx, after, math.MaxInt32)
	} else if len(refs) <= limit {
		// One more than the page holds tells whether there is a next page.
		stored, err = s.cfg.DB.DefinitionsAfter(ctx, after, limit-len(refs)+1)
	}
	if err != nil {
		s.databaseProblem(w, r, err)
		return
	}
	for _, sd := range stored {
		refs = append(refs, runtimeJob(sd))
	}
	var next *string
	if limit > 0 && len(refs) > limit {
		refs = refs[:limit]
		c := encodeJobCursor(refs[limit-1].conf.Name)
		next = &c
	}
	views, err := s.views(ctx, s.cfg.DB, refs...)
	if err != nil {
		s.databaseProblem(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"jobs": views, "next_cursor": next})
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
		if err := ex.SetPaused(ctx, j.conf.Name, paused); err != nil {
			return err
		}
		return ex.RecordAction(ctx, s.action(r, action, j.conf.Name, reason))
	})
	if err != nil {
		s.databaseProblem(w, r, err)
		return
	}
	s.cfg.Log.InfoContext(ctx, "job paused flag set", "job", j.conf.Name, "paused", paused, "request_id", requestID(ctx))
	s.writeJob(w, r, j)
}

func (s *Server) writeJob(w http.ResponseWriter, r *http.Request, j *jobRef) {
	ctx, cancel := context.WithTimeout(r.Context(), queryTimeout)
	defer cancel()
	views, err := s.views(ctx, s.cfg.DB, *j)
	if err != nil {
		s.databaseProblem(w, r, err)
		return
	}
	writeJobView(w, http.StatusOK, views[0])
}

// writeJobView answers one job. A runtime job's answer names its version in X-Job-Version:
// GET answers keep the weak ETag of their content (conditionalGET), which also changes
// when the job's state does (paused, last run), so the version travels beside it for
// If-Match.
func writeJobView(w http.ResponseWriter, status int, v Job) {
	if v.Version != nil {
		w.Header().Set("X-Job-Version", fmt.Sprint(*v.Version))
	}
	writeJSON(w, status, v)
}

// views shows jobs with their state read through ex: the pool, or the transaction that
// just changed a definition, so the answer shows what committed.
func (s *Server) views(ctx context.Context, ex store.Executor, refs ...jobRef) ([]Job, error) {
	names := make([]string, len(refs))
	for i, j := range refs {
		names[i] = j.conf.Name
	}
	now, paused, last, err := ex.JobStates(ctx, names)
	if err != nil {
		return nil, err
	}
	views := make([]Job, len(refs))
	for i := range refs {
		j := &refs[i]
		views[i] = newJobView(&j.conf, now, paused[j.conf.Name], last[j.conf.Name])
		if j.stored != nil {
			addRuntimeView(&views[i], j)
		}
	}
	return views, nil
}
