package api

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/schedulerhq/scheduler/client"
	"github.com/schedulerhq/scheduler/internal/httpx"
	"github.com/schedulerhq/scheduler/internal/idp"
	"github.com/schedulerhq/scheduler/internal/store"
)

// The scheduler as an identity provider for its targets (internal/idp): the discovery
// document and the key set, public, since a target's verifier fetches them without a token;
// and an admin's view and rotation of the signing keys, audited.

var (
	probOIDCOff         = httpx.ProblemType{Slug: "oidc-off", Title: "This scheduler signs no OIDC tokens"}
	probRotationTooSoon = httpx.ProblemType{Slug: "rotation-too-soon", Title: "The next key has not been published long enough"}
)

// oidcPublicRoutes mounts the public documents on r, outside /v1 and its tokens.
func (s *Server) oidcPublicRoutes(r chi.Router) {
	r.Get(idp.DiscoveryPath, s.oidcDocument)
	r.Get(idp.JWKSPath, s.oidcDocument)
}

func (s *Server) oidcDocument(w http.ResponseWriter, r *http.Request) {
	if s.cfg.TokenKeys == nil {
		httpx.WriteProblem(w, r, http.StatusNotFound, probOIDCOff, idp.ErrNoSecretKey.Error())
		return
	}
	s.cfg.TokenKeys.ServeHTTP(w, r)
}

// oidcKeysOff answers for a replica that signs nothing, and reports whether it did.
func (s *Server) oidcKeysOff(w http.ResponseWriter, r *http.Request) bool {
	if err := s.cfg.TokenKeys.CanSign(); err != nil {
		httpx.WriteProblem(w, r, http.StatusConflict, probOIDCOff, err.Error())
		return true
	}
	return false
}

// listOIDCKeys answers GET /v1/oidc/keys: every key, retired ones too, without a private part.
func (s *Server) listOIDCKeys(w http.ResponseWriter, r *http.Request) {
	if s.oidcKeysOff(w, r) {
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), queryTimeout)
	defer cancel()
	if err := s.cfg.TokenKeys.Maintain(ctx); err != nil {
		s.databaseProblem(w, r, err)
		return
	}
	s.writeOIDCKeys(w, r, ctx, http.StatusOK, nil)
}

// rotateOIDCKeys answers POST /v1/oidc/keys/rotate: the next key signs from now on, the
// current one becomes previous (still published until its tokens expire), a new next key is
// published. Refused (409) while the next key is younger than its pre-publication, which
// verifiers' cached key sets need to hold it. Audited in the rotation's transaction.
func (s *Server) rotateOIDCKeys(w http.ResponseWriter, r *http.Request) {
	reason, ok := actionReason(w, r)
	if !ok || s.oidcKeysOff(w, r) {
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), queryTimeout)
	defer cancel()
	action := s.actionIn(r, store.ActionOIDCRotate, "", reason)
	rot, err := s.cfg.TokenKeys.Rotate(ctx, func(ex store.Executor, rot idp.Rotation) error {
		detail, err := json.Marshal(map[string]any{"current": rot.Current, "previous": rot.Previous, "retired": nonNil(rot.Retired)})
		if err != nil {
			return err
		}
		action.Detail = detail
		return ex.RecordAction(ctx, action)
	})
	var soon *idp.TooSoonError
	switch {
	case errors.As(err, &soon):
		w.Header().Set("Retry-After", retryAfterSeconds(time.Until(soon.ReadyAt)))
		httpx.WriteProblem(w, r, http.StatusConflict, probRotationTooSoon, err.Error())
		return
	case err != nil:
		s.databaseProblem(w, r, err)
		return
	}
	s.cfg.Log.InfoContext(ctx, "OIDC signing keys rotated", "current", rot.Current, "previous", rot.Previous,
		"request_id", httpx.RequestID(ctx))
	s.writeOIDCKeys(w, r, ctx, http.StatusOK, &client.OIDCRotated{Current: rot.Current, Previous: rot.Previous, Retired: nonNil(rot.Retired)})
}

func (s *Server) writeOIDCKeys(w http.ResponseWriter, r *http.Request, ctx context.Context, status int, rot *client.OIDCRotated) {
	keys, err := s.cfg.TokenKeys.List(ctx)
	if err != nil {
		s.databaseProblem(w, r, err)
		return
	}
	view := client.OIDCKeys{Issuer: s.cfg.TokenKeys.Issuer(), Keys: make([]client.OIDCKey, 0, len(keys)), Rotated: rot}
	for _, k := range keys {
		view.Keys = append(view.Keys, client.OIDCKey{KID: k.KID, Alg: k.Alg, State: k.State, CreatedAt: k.CreatedAt.UTC(),
			CurrentAt: utcPtr(k.CurrentAt), PreviousAt: utcPtr(k.PreviousAt), RetiredAt: utcPtr(k.RetiredAt)})
	}
	httpx.WriteJSON(w, status, view)
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func retryAfterSeconds(d time.Duration) string {
	return strconv.Itoa(int(max(d.Round(time.Second)/time.Second, 1)))
}
