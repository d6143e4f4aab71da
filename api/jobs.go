package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/go-chi/chi/v5"

	"github.com/schedulerhq/scheduler/client"
	"github.com/schedulerhq/scheduler/internal/config"
	"github.com/schedulerhq/scheduler/internal/httpx"
	"github.com/schedulerhq/scheduler/internal/namespace"
	"github.com/schedulerhq/scheduler/internal/runtimejob"
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
	def *runtimejob.Definition
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
	checked, decoded, err := runtimejob.Load(sd.Definition)
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

// job returns the {name} job of the route's namespace, built-in or runtime, or answers
// (404, 503) and returns nil.
func (s *Server) job(w http.ResponseWriter, r *http.Request) *jobRef {
	name := chi.URLParam(r, "name")
	j, err := s.findJob(r.Context(), routeNamespace(r), name)
	switch {
	case err != nil:
		s.databaseProblem(w, r, err)
	case j == nil:
		jobNotFound(w, r, name)
	}
	return j
}

// jobToActOn is job for a route that acts on the job: a built-in job is an admin's alone.
func (s *Server) jobToActOn(w http.ResponseWriter, r *http.Request) *jobRef {
	j := s.job(w, r)
	if j != nil && j.stored == nil && !principal(r.Context()).CanActOnBuiltin() {
		s.forbid(w, r, "act on built-in job "+j.conf.Name+": only an admin may")
		return nil
	}
	return j
}

// findJob returns the job name of namespace ns, or nil when it has none. The built-in jobs
// are namespace default's.
func (s *Server) findJob(ctx context.Context, ns, name string) (*jobRef, error) {
	if j, ok := s.jobs[name]; ok && ns == namespace.Default {
		return &jobRef{conf: *j}, nil
	}
	if !namespace.Valid(name) {
		return nil, nil
	}
	ctx, cancel := context.WithTimeout(ctx, queryTimeout)
	defer cancel()
	sd, err := s.cfg.DB.Definition(ctx, namespace.Key(ns, name))
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
	httpx.WriteProblemFor(w, r, jobNotFoundProblem(name))
}

func jobNotFoundProblem(name string) *client.Problem {
	return httpx.Problem(http.StatusNotFound, probJobNotFound,
		fmt.Sprintf("no job named %q; GET /v1/jobs lists them", name), client.FieldError{Field: "name", Detail: "unknown job"})
}

// listJobs lists the built-in jobs in configuration order, then the runtime jobs by name;
// with ?limit, one page of them, which the next_cursor of the answer continues. The runtime
// jobs' views come from the replica's cache (jobViews), so a request reads their versions
// and state, not their definitions. Filters and counts are listFilteredJobs's.
func (s *Server) listJobs(w http.ResponseWriter, r *http.Request) {
	q, ok := httpx.QueryParams(w, r)
	if !ok {
		return
	}
	f, bad := parseJobListQuery(q, chi.URLParam(r, "ns") != "")
	if len(bad) > 0 {
		badJobListQuery(w, r, bad)
		return
	}
	ns := routeNamespace(r)
	if f.every {
		ns = everyNamespace
	}
	if f.filtered() {
		s.listFilteredJobs(w, r, ns, f)
		return
	}
	limit, after := f.limit, f.after

	// The built-in jobs the page holds: those after the cursor when it names one, none when
	// it names a runtime job (they come first).
	builtins := s.cfg.Jobs
	if !hasBuiltins(ns) {
		builtins = nil
	}
	list := make([]*jobView, 0, len(builtins))
	builtinCursor := after == ""
	for _, j := range builtins {
		if builtinCursor {
			ref := jobRef{conf: j}
			list = append(list, &jobView{ref: ref, static: staticJobView(&ref)})
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
	if limit == 0 || len(list) <= limit {
		// One more than the page holds tells whether there is a next page.
		n := 0
		if limit > 0 {
			n = limit - len(list) + 1
		}
		runtime, err := s.runtimeRefs(ctx, ns, after, n)
		if err != nil {
			s.databaseProblem(w, r, err)
			return
		}
		list = append(list, runtime...)
	}
	var next *string
	if limit > 0 && len(list) > limit {
		list = list[:limit]
		c := encodeJobCursor(list[limit-1].ref.conf.Name)
		next = &c
	}
	names := make([]string, len(list))
	for i, jv := range list {
		names[i] = jv.ref.conf.Name
	}
	now, paused, last, err := s.cfg.DB.JobStates(ctx, names)
	var ran map[string]store.RanRuns
	if err == nil {
		ran, err = ranRuns(ctx, s.cfg.DB, list)
	}
	if err == nil {
		err = writeJobList(w, list, now, paused, last, ran, next, nil)
	}
	if err != nil {
		s.databaseProblem(w, r, err)
	}
}

// jobRoute is a …/jobs/{name} route's request: the route's namespace and the job's name.
type jobRoute struct{ ns, name string }

// Extract reads the namespace and the name.
func (q *jobRoute) Extract(r *http.Request) error {
	q.ns, q.name = routeNamespace(r), chi.URLParam(r, "name")
	return nil
}

func (s *Server) getJob(ctx context.Context, q *jobRoute) (*jobAnswer, error) {
	j, err := s.findJob(ctx, q.ns, q.name)
	switch {
	case err != nil:
		return nil, err
	case j == nil:
		return nil, jobNotFoundProblem(q.name)
	}
	views, err := s.views(ctx, s.cfg.DB, *j)
	if err != nil {
		return nil, err
	}
	if j.stored != nil {
		children, err := s.cfg.DB.Children(ctx, j.conf.Name, false)
		if err != nil {
			return nil, err
		}
		for _, c := range children {
			_, name := namespace.Split(c)
			views[0].Children = append(views[0].Children, name)
		}
	}
	return &jobAnswer{views[0]}, nil
}

// jobAnswer is one job as an endpoint answers it, with X-Job-Version (writeJobView says why).
type jobAnswer struct{ client.Job }

// SetHeader names a runtime job's version.
func (a jobAnswer) SetHeader(h http.Header) {
	if a.Version != nil {
		h.Set("X-Job-Version", fmt.Sprint(*a.Version))
	}
}

func (s *Server) pauseJob(w http.ResponseWriter, r *http.Request)  { s.setPaused(w, r, true) }
func (s *Server) resumeJob(w http.ResponseWriter, r *http.Request) { s.setPaused(w, r, false) }

// setPaused persists the flag in job_settings, where every replica and the next leader read
// it; the leader stops (or resumes) the job's scheduled runs. Manual triggers still work on
// a paused job.
func (s *Server) setPaused(w http.ResponseWriter, r *http.Request, paused bool) {
	j := s.jobToActOn(w, r)
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
		if paused {
			if err := pauseEvent(ctx, ex, j, principalName(r), reason); err != nil {
				return err
			}
		}
		return ex.RecordAction(ctx, s.action(r, action, j.conf.Name, reason))
	})
	if err != nil {
		s.databaseProblem(w, r, err)
		return
	}
	s.cfg.Log.InfoContext(ctx, "job paused flag set", "job", j.conf.Name, "paused", paused, "request_id", httpx.RequestID(ctx))
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
func writeJobView(w http.ResponseWriter, status int, v client.Job) {
	jobAnswer{v}.SetHeader(w.Header())
	httpx.WriteJSON(w, status, v)
}

// views shows jobs with their state read through ex: the pool, or the transaction that
// just changed a definition, so the answer shows what committed.
func (s *Server) views(ctx context.Context, ex store.Executor, refs ...jobRef) ([]client.Job, error) {
	list := make([]*jobView, len(refs))
	for i := range refs {
		list[i] = &jobView{ref: refs[i], static: staticJobView(&refs[i])}
	}
	return s.stateViews(ctx, ex, list)
}

// stateViews adds each job's state, read through ex, to its view.
func (s *Server) stateViews(ctx context.Context, ex store.Executor, list []*jobView) ([]client.Job, error) {
	names := make([]string, len(list))
	for i, jv := range list {
		names[i] = jv.ref.conf.Name
	}
	now, paused, last, err := ex.JobStates(ctx, names)
	if err != nil {
		return nil, err
	}
	ran, err := ranRuns(ctx, ex, list)
	if err != nil {
		return nil, err
	}
	views := make([]client.Job, len(list))
	for i, jv := range list {
		views[i] = jv.withState(now, paused[names[i]], last[names[i]], ran[names[i]])
	}
	return views, nil
}
