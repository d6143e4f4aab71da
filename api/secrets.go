package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strings"

	"github.com/go-chi/chi/v5"

	"github.com/schedulerhq/scheduler/client"
	"github.com/schedulerhq/scheduler/internal/httpx"
	"github.com/schedulerhq/scheduler/internal/secrets/allowedhosts"
	"github.com/schedulerhq/scheduler/internal/secrets/seal"
	"github.com/schedulerhq/scheduler/internal/store"
)

// A namespace's secrets: GET /v1/namespaces/{ns}/secrets and GET, PUT, DELETE
// /v1/namespaces/{ns}/secrets/{name}. A viewer of the namespace reads names, versions and
// allowed hosts; an editor stores and deletes. No answer, log line or audit row holds a
// value: PUT seals it (internal/secrets/seal) before it reaches the store, and nothing reads it
// back but the leader's call.

const (
	maxSecretValue  = 8 << 10
	maxAllowedHosts = 32
)

var (
	secretNameRE = regexp.MustCompile(`^[A-Z][A-Z0-9_]{0,62}$`)
	// reservedSecretNames are the variables that hold the sealing keys: a secret of that name
	// would read as SCHEDULER_SECRET_KEY in every message that names its variable.
	reservedSecretNames = []string{"KEY", "KEY_PREVIOUS"}
)

var (
	probSecretNotFound   = httpx.ProblemType{Slug: "secret-not-found", Title: "No such secret"}
	probSecretKeyMissing = httpx.ProblemType{Slug: "secret-key-missing", Title: "This scheduler has no key to seal secrets with"}
)

// secretRoutes are the routes of /v1/namespaces/{ns}/secrets. The caller's grants are
// checked before the namespace's existence, as on a namespace's jobs.
func (s *Server) secretRoutes(r chi.Router) {
	const list, one = "/namespaces/{ns}/secrets", "/namespaces/{ns}/secrets/{name}"
	r.Group(func(r chi.Router) {
		r.Use(s.namespaceScope)
		r.Get(list, get(s, s.listSecrets))
		r.Get(one, get(s, s.getSecret))
		r.Group(func(r chi.Router) {
			r.Use(s.mayAct, s.mayEdit)
			r.Put(one, s.putSecret)
			r.Delete(one, act(s, http.StatusNoContent, s.deleteSecret))
		})
	})
}

func newSecretView(sec store.Secret) client.Secret {
	return client.Secret{Namespace: sec.Namespace, Name: sec.Name, Version: sec.Version, AllowedHosts: sec.AllowedHosts,
		CreatedAt: sec.CreatedAt.UTC(), UpdatedAt: sec.UpdatedAt.UTC()}
}

func (s *Server) listSecrets(ctx context.Context, q *namespaceRoute) (*client.Secrets, error) {
	list, err := s.cfg.DB.Secrets(ctx, q.ns)
	if err != nil {
		return nil, err
	}
	views := make([]client.Secret, len(list))
	for i, sec := range list {
		views[i] = newSecretView(sec)
	}
	return &client.Secrets{Secrets: views}, nil
}

// secretRoute is a …/secrets/{name} route's request: the namespace and the name.
type secretRoute struct {
	namespaceRoute
	name string
}

// Extract reads the namespace and the name.
func (q *secretRoute) Extract(r *http.Request) error {
	q.name = chi.URLParam(r, "name")
	return q.namespaceRoute.Extract(r)
}

// known refuses a name that no secret can have as not found, before any read.
func (q *secretRoute) known() error {
	if !secretNameRE.MatchString(q.name) {
		return secretNotFound(q.ns, q.name)
	}
	return nil
}

func (s *Server) getSecret(ctx context.Context, q *secretRoute) (*client.Secret, error) {
	if err := q.known(); err != nil {
		return nil, err
	}
	sec, err := s.cfg.DB.Secret(ctx, q.ns, q.name)
	switch {
	case errors.Is(err, store.ErrSecretNotFound):
		return nil, secretNotFound(q.ns, q.name)
	case err != nil:
		return nil, err
	}
	v := newSecretView(sec)
	return &v, nil
}

// putSecret stores the secret (201) or replaces it at the next version (200), sealed, with
// its audit row in the same transaction.
func (s *Server) putSecret(w http.ResponseWriter, r *http.Request) {
	ns, name := routeNamespace(r), chi.URLParam(r, "name")
	body, ok := httpx.ReadBody(w, r)
	if !ok {
		return
	}
	var req client.SecretRequest
	if body != nil && !httpx.DecodeStrict(w, r, body, &req) {
		return
	}
	reason, ok := checkReason(w, r, &req.Reason)
	if !ok {
		return
	}
	hosts, fields := s.checkSecret(ns, name, req)
	if len(fields) > 0 {
		httpx.WriteProblem(w, r, http.StatusUnprocessableEntity, httpx.ProbInvalidRequest,
			fmt.Sprintf("the secret has %d problem(s); see errors", len(fields)), fields...)
		return
	}
	if s.cfg.Secrets == nil || !s.cfg.Secrets.Box().CanSeal() {
		httpx.WriteProblem(w, r, http.StatusConflict, probSecretKeyMissing,
			"this scheduler has no SCHEDULER_SECRET_KEY, so it cannot store a secret; an operator must "+seal.NoKeyHint+
				". Reading secrets' names and jobs naming them still work")
		return
	}
	keyID, sealed, err := s.cfg.Secrets.Box().Seal(ns, name, []byte(req.Value))
	if err != nil {
		s.databaseProblem(w, r, err) // a nonce could not be drawn: the machine, not the request
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), queryTimeout)
	defer cancel()
	var sec store.Secret
	var created bool
	err = s.cfg.DB.Atomically(ctx, func(ex store.Executor) error {
		var err error
		sec, created, err = ex.PutSecret(ctx, store.SealedSecret{Secret: store.Secret{Namespace: ns, Name: name, KeyID: keyID,
			AllowedHosts: hosts}, Sealed: sealed})
		if err != nil {
			return err
		}
		return ex.RecordAction(ctx, s.secretAction(r, store.ActionSecretPut, sec, created, reason))
	})
	switch {
	case errors.Is(err, store.ErrNamespaceNotFound):
		namespaceNotFound(w, r, ns)
		return
	case err != nil:
		s.databaseProblem(w, r, err)
		return
	}
	status := http.StatusOK
	if created {
		status = http.StatusCreated
		w.Header().Set("Location", "/v1/namespaces/"+ns+"/secrets/"+name)
	}
	s.cfg.Log.InfoContext(ctx, "secret stored", "namespace", ns, "secret", name, "version", sec.Version,
		"key_id", sec.KeyID, "created", created, "request_id", httpx.RequestID(ctx))
	httpx.WriteJSON(w, status, newSecretView(sec))
}

// checkSecret checks PUT's name and body, every field at once, and returns the allowed hosts
// in their normal form. No message repeats the value.
func (s *Server) checkSecret(ns, name string, req client.SecretRequest) ([]string, []client.FieldError) {
	var fields []client.FieldError
	fail := func(field, format string, args ...any) {
		fields = append(fields, client.FieldError{Field: field, Detail: fmt.Sprintf(format, args...)})
	}
	switch {
	case !secretNameRE.MatchString(name):
		fail("name", "%q is not a secret name: want 1 to 63 upper-case letters, digits and _, starting with a letter (e.g. BILLING_TOKEN)", name)
	case slices.Contains(reservedSecretNames, name):
		fail("name", "%s is reserved: SCHEDULER_SECRET_%s holds a key that seals secrets; choose another name", name, name)
	case s.cfg.Secrets != nil && s.cfg.Secrets.IsOperator(ns, name):
		fail("name", "namespace %s has the operator's secret %s (SCHEDULER_SECRET_%s), which jobs use before a stored one; choose another name", ns, name, name)
	}
	switch v := req.Value; { // left out, null and "" alike
	case v == "":
		fail("value", "required: the secret's value, a non-empty string")
	case len(v) > maxSecretValue:
		fail("value", "%d bytes; at most %d (8 KiB)", len(v), maxSecretValue)
	case strings.ContainsRune(v, 0):
		fail("value", "holds a NUL character (\\u0000), which no header can carry")
	}
	switch n := len(req.AllowedHosts); {
	case n == 0:
		fail("allowed_hosts", "required: the hosts the secret may be sent to, 1 to %d of host or host:port (e.g. [\"api.example.com\"])", maxAllowedHosts)
	case n > maxAllowedHosts:
		fail("allowed_hosts", "%d hosts; at most %d", n, maxAllowedHosts)
	}
	var hosts []string
	for i, entry := range req.AllowedHosts {
		h, err := allowedhosts.Parse(entry)
		if err != nil {
			fail(fmt.Sprintf("allowed_hosts[%d]", i), "%v", err)
			continue
		}
		if !slices.Contains(hosts, h) {
			hosts = append(hosts, h)
		}
	}
	return hosts, fields
}

// deleteSecret deletes the secret (204), audited in the same transaction. Jobs that name it
// fail their next run saying so.
func (s *Server) deleteSecret(ctx context.Context, q *secretDelete) (*struct{}, error) {
	ns, name, r, reason := q.ns, q.name, q.r, q.reason
	if err := q.known(); err != nil {
		return nil, err
	}
	var sec store.Secret
	err := s.cfg.DB.Atomically(ctx, func(ex store.Executor) error {
		var err error
		if sec, err = ex.DeleteSecret(ctx, ns, name); err != nil {
			return err
		}
		return ex.RecordAction(ctx, s.secretAction(r, store.ActionSecretDelete, sec, false, reason))
	})
	switch {
	case errors.Is(err, store.ErrSecretNotFound):
		return nil, secretNotFound(ns, name)
	case err != nil:
		return nil, err
	}
	s.cfg.Log.InfoContext(ctx, "secret deleted", "namespace", ns, "secret", name, "version", sec.Version, "request_id", httpx.RequestID(ctx))
	return nil, nil
}

// secretDelete is DELETE …/secrets/{name}'s request: the secret, then the optional reason.
type secretDelete struct {
	secretRoute
	reasonRequest
}

// Extract reads the route and keeps the request.
func (q *secretDelete) Extract(r *http.Request) error {
	if err := q.secretRoute.Extract(r); err != nil {
		return err
	}
	return q.reasonRequest.Extract(r)
}

// secretAction is the audit row of a put or a delete: the name, version and allowed hosts,
// never the value, nor the key id (which says nothing to an auditor).
func (s *Server) secretAction(r *http.Request, action string, sec store.Secret, created bool, reason *string) store.Action {
	a := s.actionIn(r, action, sec.Namespace, reason)
	detail := map[string]any{"name": sec.Name, "version": sec.Version, "allowed_hosts": sec.AllowedHosts}
	if action == store.ActionSecretPut {
		detail["created"] = created
	}
	a.Detail, _ = json.Marshal(detail)
	return a
}

func secretNotFound(ns, name string) error {
	return httpx.Problem(http.StatusNotFound, probSecretNotFound, fmt.Sprintf(
		"namespace %s has no secret named %q; GET /v1/namespaces/%s/secrets lists them, PUT /v1/namespaces/%s/secrets/<NAME> stores one",
		ns, name, ns, ns))
}
