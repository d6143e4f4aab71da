package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/go-chi/chi/v5"

	"github.com/schedulerhq/scheduler/client"
	"github.com/schedulerhq/scheduler/internal/httpx"
	"github.com/schedulerhq/scheduler/internal/runtimejob"
	"github.com/schedulerhq/scheduler/internal/store"
)

// PUT /v1/jobs/{name}: a runtime job's create or replace, by name.

// putJob creates the {name} job (201) or replaces its definition (200). With If-Match the
// job must exist at that version (412 otherwise). A definition equal to the stored one
// keeps its version and writes no audit row.
func (s *Server) putJob(w http.ResponseWriter, r *http.Request) {
	name := chi.URLParam(r, "name")
	if s.refuseBuiltin(w, r, name) {
		return
	}
	cond, ok := parseIfMatch(w, r)
	if !ok {
		return
	}
	dw, ok := readDefinitionWrite(w, r)
	if !ok {
		return
	}
	j, ok := s.checkPutDefinition(w, r, name, dw.def)
	if !ok {
		return
	}
	name = j.Def.Key()
	def, _ := json.Marshal(j.Def)
	ctx, cancel := context.WithTimeout(r.Context(), queryTimeout)
	defer cancel()

	if dw.dryRun {
		s.previewPut(ctx, w, r, j, def, cond)
		return
	}
	// A create that loses a race with another request creating the same name is retried
	// once, as the replacement it has become.
	put, err := s.putDefinition(ctx, r, j, def, cond, dw.reason)
	if errors.Is(err, store.ErrDefinitionExists) {
		put, err = s.putDefinition(ctx, r, j, def, cond, dw.reason)
	}
	if err != nil {
		s.putProblem(w, r, name, put.current, err)
		return
	}
	status := http.StatusOK
	switch {
	case put.created:
		status = http.StatusCreated
		s.cfg.Log.InfoContext(ctx, "runtime job created", "job", name, "version", *put.view.Version, "request_id", httpx.RequestID(ctx))
	case put.changed:
		s.cfg.Log.InfoContext(ctx, "runtime job replaced", "job", name, "version", *put.view.Version, "request_id", httpx.RequestID(ctx))
	}
	writeDefinitionAnswer(w, status, put.view)
}

// checkPutDefinition checks d as the definition of the URL's job name: a body that names
// another job is one more wrong field.
func (s *Server) checkPutDefinition(w http.ResponseWriter, r *http.Request, name string, d runtimejob.Definition) (*runtimejob.Checked, bool) {
	var fields []client.FieldError
	if d.Name != "" && d.Name != name {
		fields = append(fields, client.FieldError{Field: "name", Detail: fmt.Sprintf(
			"the body names job %q and the URL %q; leave name out or make them the same", d.Name, name)})
	}
	d.Name = name
	return s.checkDefinition(w, r, d, fields...)
}

// definitionPut is what a PUT's transaction did: created the job, or changed it, or neither
// (the same definition); view is the job after it, current the stored definition before.
type definitionPut struct {
	view             client.Job
	current          store.StoredDefinition
	created, changed bool
}

// putDefinition replaces the job's definition (at cond's version), or creates it when it
// does not exist and If-Match is absent, with its audit row, in one transaction.
func (s *Server) putDefinition(ctx context.Context, r *http.Request, j *runtimejob.Checked, def []byte, cond ifMatch, reason *string) (definitionPut, error) {
	name := j.Def.Key()
	var put definitionPut
	err := s.cfg.DB.Atomically(ctx, func(ex store.Executor) error {
		put = definitionPut{}
		if err := checkAfterInTx(ctx, ex, j.Def); err != nil {
			return err
		}
		before, after, err := ex.ReplaceDefinition(ctx, name, j.Def.Kind(), def, cond.version)
		put.current = before
		switch {
		case errors.Is(err, store.ErrDefinitionNotFound) && !cond.given:
			put.created = true
			if after, err = ex.CreateDefinition(ctx, name, j.Def.Kind(), def, s.cfg.MaxJobs); err != nil {
				return err
			}
			put.view, err = s.recordChange(ctx, ex, r, store.ActionCreate, reason, nil, &after)
			return err
		case err != nil:
			return err
		case before.Version == after.Version:
			views, err := s.views(ctx, ex, runtimeJob(after)) // unchanged: nothing to audit
			if err == nil {
				put.view = views[0]
			}
			return err
		}
		put.changed = true
		put.view, err = s.recordChange(ctx, ex, r, store.ActionUpdate, reason, &before, &after)
		return err
	})
	return put, err
}

// putProblem answers a PUT's failed transaction; current is the stored definition it met.
func (s *Server) putProblem(w http.ResponseWriter, r *http.Request, name string, current store.StoredDefinition, err error) {
	switch {
	case errors.Is(err, store.ErrDefinitionNotFound):
		httpx.WriteProblem(w, r, http.StatusPreconditionFailed, probVersionMismatch, fmt.Sprintf(
			"no job named %q exists, and If-Match names a version of it; leave If-Match out to create it", name),
			client.FieldError{Field: "If-Match", Detail: "the job does not exist"})
	case errors.Is(err, store.ErrVersionMismatch):
		versionMismatch(w, r, name, current.Version)
	case writeAfterRefused(w, r, err): // answered
	default:
		s.definitionProblem(w, r, name, err)
	}
}
