package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/schedulerhq/scheduler/client"
	"github.com/schedulerhq/scheduler/internal/httpx"
	"github.com/schedulerhq/scheduler/internal/runtimejob"
	"github.com/schedulerhq/scheduler/internal/store"
)

// Dry runs of POST and PUT: the view the job would have, with its next slots; nothing written.

// previewPut answers what PUT would: its conditions checked, the view with the version the
// job would have. Nothing is written.
func (s *Server) previewPut(ctx context.Context, w http.ResponseWriter, r *http.Request, j *runtimejob.Checked, def []byte, cond ifMatch) {
	name := j.Def.Name
	sd, err := s.cfg.DB.Definition(ctx, name)
	switch {
	case errors.Is(err, store.ErrDefinitionNotFound) && cond.given:
		httpx.WriteProblem(w, r, http.StatusPreconditionFailed, probVersionMismatch, fmt.Sprintf(
			"no job named %q exists, and If-Match names a version of it; leave If-Match out to create it", name),
			client.FieldError{Field: "If-Match", Detail: "the job does not exist"})
	case errors.Is(err, store.ErrDefinitionNotFound):
		s.writePreview(w, r, j, def, 1)
	case err != nil:
		s.databaseProblem(w, r, err)
	case cond.version != 0 && cond.version != sd.Version:
		versionMismatch(w, r, name, sd.Version)
	case sameDefinition(sd.Definition, def):
		s.writePreview(w, r, j, def, sd.Version)
	default:
		s.writePreview(w, r, j, def, sd.Version+1)
	}
}

// sameDefinition reports whether a stored definition is def: the store keeps the version of
// a replacement equal to it.
func sameDefinition(stored json.RawMessage, def []byte) bool {
	d, err := runtimejob.Decode(stored)
	if err != nil {
		return false
	}
	b, _ := json.Marshal(d)
	return bytes.Equal(b, def)
}

// writePreview answers a dry run: the view the job would have at version, with its next
// slots; no ETag, since nothing was stored.
func (s *Server) writePreview(w http.ResponseWriter, r *http.Request, j *runtimejob.Checked, def []byte, version int64) {
	ctx, cancel := context.WithTimeout(r.Context(), queryTimeout)
	defer cancel()
	ref := jobRef{conf: j.Config(), def: &j.Def,
		stored: &store.StoredDefinition{Name: j.Def.Name, Version: version, Kind: j.Def.Kind(), Definition: def}}
	views, err := s.views(ctx, s.cfg.DB, ref)
	if err != nil {
		s.databaseProblem(w, r, err)
		return
	}
	httpx.WriteJSON(w, http.StatusOK, views[0])
}
