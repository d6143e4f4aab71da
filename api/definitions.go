package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/schedulerhq/scheduler/client"
	"github.com/schedulerhq/scheduler/internal/httpx"
	"github.com/schedulerhq/scheduler/internal/namespace"
	"github.com/schedulerhq/scheduler/internal/runtimejob"
	"github.com/schedulerhq/scheduler/internal/store"
)

// Runtime jobs: POST /v1/jobs, PUT and DELETE /v1/jobs/{name}. A definition is checked in
// full before anything is stored (every wrong field in one 422), and stored with its audit
// row in one transaction, so no change commits unaudited. A job's version is its ETag on
// the answers of POST and PUT, and what If-Match names.

// readDefinition reads the body of POST and PUT: one job definition, strictly (an unknown
// or misspelt member is a 400, not a setting silently left at its default).
func readDefinition(w http.ResponseWriter, r *http.Request) (runtimejob.Definition, bool) {
	var d runtimejob.Definition
	body, ok := httpx.ReadBody(w, r)
	if !ok {
		return d, false
	}
	if body == nil {
		httpx.WriteProblem(w, r, http.StatusBadRequest, httpx.ProbInvalidJSON,
			"the body must be a job definition in JSON; see JobDefinition in /openapi.yaml",
			client.FieldError{Field: "(body)", Detail: "required"})
		return d, false
	}
	return d, httpx.DecodeStrict(w, r, body, &d)
}

// checkDefinition checks d against this scheduler (its built-in names, secrets, outbound
// guard and SQL role) and answers 422 listing every wrong field, fields first.
func (s *Server) checkDefinition(w http.ResponseWriter, r *http.Request, d runtimejob.Definition, fields ...client.FieldError) (*runtimejob.Checked, bool) {
	env := s.cfg.Runtime
	if env.Now.IsZero() {
		env.Now = time.Now()
	}
	// The route names the namespace; a body that names another is a mistake to report,
	// not a way into a namespace the caller was not checked for.
	ns := routeNamespace(r)
	if d.Namespace != "" && d.Namespace != ns {
		fields = append(fields, client.FieldError{Field: "namespace", Detail: fmt.Sprintf(
			"the body names namespace %q and the URL %q; send it to /v1/namespaces/%s/jobs, or leave namespace out", d.Namespace, ns, d.Namespace)})
	}
	d.Namespace = ns
	row, err := s.routeNamespaceRow(r.Context())
	if err != nil {
		s.databaseProblem(w, r, err)
		return nil, false
	}
	if row.MinInterval != nil {
		env.MinInterval = *row.MinInterval
	}
	if s.cfg.Outbound != nil && namespace.Valid(ns) {
		// The namespace's SQL targets and private hosts, as an admin bound them.
		ctx, cancel := context.WithTimeout(r.Context(), queryTimeout)
		surface, err := s.cfg.Outbound.Of(ctx, row)
		cancel()
		if err != nil {
			s.databaseProblem(w, r, err)
			return nil, false
		}
		env.SQLTarget, env.CheckURL, env.CheckNATSURL = surface.CheckSQLTarget, surface.Guard().CheckURL, surface.Guard().CheckNATSURL
	}
	if s.cfg.Secrets != nil && namespace.Valid(ns) {
		// The namespace's secrets, read once for every field that names one.
		ctx, cancel := context.WithTimeout(r.Context(), queryTimeout)
		lookup, err := s.cfg.Secrets.Lookup(ctx, ns)
		cancel()
		if err != nil {
			s.databaseProblem(w, r, err)
			return nil, false
		}
		env.Secret = lookup
	}
	j, errs := runtimejob.Check(d, env)
	for _, e := range errs {
		fields = append(fields, client.FieldError{Field: e.Field, Detail: e.Message})
	}
	ctx, cancel := context.WithTimeout(r.Context(), queryTimeout)
	graph, err := afterProblems(ctx, s.cfg.DB, d, false)
	cancel()
	if err != nil {
		s.databaseProblem(w, r, err)
		return nil, false
	}
	fields = append(fields, graph...)
	if len(fields) == 0 {
		return j, true
	}
	problems := "problems"
	if len(fields) == 1 {
		problems = "problem"
	}
	httpx.WriteProblem(w, r, http.StatusUnprocessableEntity, probInvalidDefinition,
		fmt.Sprintf("the job definition has %d %s; see errors", len(fields), problems), fields...)
	return nil, false
}

// refuseBuiltin answers 409 when name is a built-in job's, which PUT and DELETE leave alone.
func (s *Server) refuseBuiltin(w http.ResponseWriter, r *http.Request, name string) bool {
	if _, ok := s.jobs[name]; !ok || routeNamespace(r) != namespace.Default {
		return false
	}
	httpx.WriteProblem(w, r, http.StatusConflict, probBuiltinJob, fmt.Sprintf(
		"%s is a built-in job: built-in jobs keep their compiled definition; tune them with SCHEDULER_JOB_%s_* variables",
		name, strings.ToUpper(strings.ReplaceAll(name, "-", "_"))))
	return true
}

// definitionWrite is what POST and PUT read before the definition's check, in this order:
// ?dry_run, the X-Reason header, the body.
type definitionWrite struct {
	dryRun bool
	reason *string
	def    runtimejob.Definition
}

// readDefinitionWrite reads a POST's or PUT's definitionWrite, or answers the first thing
// wrong with it.
func readDefinitionWrite(w http.ResponseWriter, r *http.Request) (definitionWrite, bool) {
	var dw definitionWrite
	q, ok := httpx.QueryParams(w, r)
	if !ok {
		return dw, false
	}
	if dw.dryRun, ok = parseDryRun(w, r, q); !ok {
		return dw, false
	}
	if dw.reason, ok = headerReason(w, r); !ok {
		return dw, false
	}
	dw.def, ok = readDefinition(w, r)
	return dw, ok
}

// createJob defines a new runtime job (201), or answers 409 when the name is taken.
func (s *Server) createJob(w http.ResponseWriter, r *http.Request) {
	dw, ok := readDefinitionWrite(w, r)
	if !ok {
		return
	}
	dryRun, reason := dw.dryRun, dw.reason
	j, ok := s.checkDefinition(w, r, dw.def)
	if !ok {
		return
	}
	name := j.Def.Key()
	def, _ := json.Marshal(j.Def)
	ctx, cancel := context.WithTimeout(r.Context(), queryTimeout)
	defer cancel()

	if dryRun {
		// What the create would answer, short of the SCHEDULER_MAX_JOBS count.
		_, err := s.cfg.DB.Definition(ctx, name)
		switch {
		case err == nil:
			err = store.ErrDefinitionExists
		case errors.Is(err, store.ErrDefinitionNotFound):
			s.writePreview(w, r, j, def, 1)
			return
		}
		s.definitionProblem(w, r, name, err)
		return
	}

	var view client.Job
	err := s.cfg.DB.Atomically(ctx, func(ex store.Executor) error {
		if err := checkAfterInTx(ctx, ex, j.Def); err != nil {
			return err
		}
		sd, err := ex.CreateDefinition(ctx, name, j.Def.Kind(), def, s.cfg.MaxJobs)
		if err != nil {
			return err
		}
		view, err = s.recordChange(ctx, ex, r, store.ActionCreate, reason, nil, &sd)
		return err
	})
	if err != nil {
		if !writeAfterRefused(w, r, err) {
			s.definitionProblem(w, r, name, err)
		}
		return
	}
	s.cfg.Log.InfoContext(ctx, "runtime job created", "job", name, "version", *view.Version, "request_id", httpx.RequestID(ctx))
	writeDefinitionAnswer(w, http.StatusCreated, view)
}

// deleteJob deletes a runtime job (204). Its runs and its audit rows stay.
func (s *Server) deleteJob(w http.ResponseWriter, r *http.Request) {
	name := chi.URLParam(r, "name")
	if s.refuseBuiltin(w, r, name) {
		return
	}
	cond, ok := parseIfMatch(w, r)
	if !ok {
		return
	}
	reason, ok := headerReason(w, r)
	if !ok {
		return
	}
	q, ok := httpx.QueryParams(w, r)
	if !ok {
		return
	}
	force, ok := parseForce(w, r, q, reason)
	if !ok {
		return
	}
	if !namespace.Valid(name) {
		jobNotFound(w, r, name)
		return
	}
	name = namespace.Key(routeNamespace(r), name)
	ctx, cancel := context.WithTimeout(r.Context(), queryTimeout)
	defer cancel()
	var before store.StoredDefinition
	err := s.cfg.DB.Atomically(ctx, func(ex store.Executor) error {
		// The definitions' lock first, as every write that checks parents takes it.
		children, err := ex.Children(ctx, name, true)
		if err != nil {
			return err
		}
		if before, err = ex.DeleteDefinition(ctx, name, cond.version); err != nil {
			return err
		}
		if len(children) > 0 && !force {
			return &hasChildren{children: children}
		}
		// A job defined later under this name starts as its definition says, not paused
		// by an operator (or the engine's auto-pause) of the job deleted.
		_, paused, _, err := ex.JobStates(ctx, []string{name})
		if err != nil {
			return err
		}
		if paused[name] {
			if err := ex.SetPaused(ctx, name, false); err != nil {
				return err
			}
		}
		_, err = s.recordChange(ctx, ex, r, store.ActionDelete, reason, &before, nil)
		return err
	})
	switch {
	case errors.Is(err, store.ErrDefinitionNotFound):
		jobNotFound(w, r, name)
		return
	case errors.Is(err, store.ErrVersionMismatch):
		versionMismatch(w, r, name, before.Version)
		return
	case writeHasChildren(w, r, name, err):
		return
	case err != nil:
		s.databaseProblem(w, r, err)
		return
	}
	s.cfg.Log.InfoContext(ctx, "runtime job deleted", "job", name, "version", before.Version, "request_id", httpx.RequestID(ctx))
	w.WriteHeader(http.StatusNoContent)
}

// recordChange writes a definition change's audit row, with the definition before and after
// in its detail, and returns the job's view after the change (none after a delete), read in
// the same transaction.
func (s *Server) recordChange(ctx context.Context, ex store.Executor, r *http.Request, action string, reason *string, before, after *store.StoredDefinition) (client.Job, error) {
	var change struct {
		Before json.RawMessage `json:"before"`
		After  json.RawMessage `json:"after"`
	}
	name := ""
	if before != nil {
		change.Before, name = before.Definition, before.Name
	}
	if after != nil {
		change.After, name = after.Definition, after.Name
	}
	a := s.action(r, action, name, reason)
	a.Detail, _ = json.Marshal(change)
	if err := ex.RecordAction(ctx, a); err != nil || after == nil {
		return client.Job{}, err
	}
	views, err := s.views(ctx, ex, runtimeJob(*after))
	if err != nil {
		return client.Job{}, err
	}
	return views[0], nil
}

// definitionProblem answers a failed definition write.
func (s *Server) definitionProblem(w http.ResponseWriter, r *http.Request, name string, err error) {
	switch {
	case errors.Is(err, store.ErrDefinitionExists):
		httpx.WriteProblem(w, r, http.StatusConflict, probJobExists, fmt.Sprintf(
			"a job named %s exists; replace it with PUT %s, or choose another name", name, jobPath(name)),
			client.FieldError{Field: "name", Detail: "taken"})
	case errors.Is(err, store.ErrNamespaceQuota):
		httpx.WriteProblem(w, r, http.StatusUnprocessableEntity, probNamespaceQuota, fmt.Sprintf(
			"namespace %s is at its quota: %v; delete one of its jobs, or ask an admin to raise its max_jobs", namespace.Of(name), err))
	case errors.Is(err, store.ErrTooManyJobs):
		httpx.WriteProblem(w, r, http.StatusConflict, probTooManyJobs, fmt.Sprintf(
			"the scheduler holds its maximum of %d runtime jobs (SCHEDULER_MAX_JOBS); delete one, or raise SCHEDULER_MAX_JOBS", s.cfg.MaxJobs))
	default:
		s.databaseProblem(w, r, err)
	}
}
