package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/schedulerhq/scheduler/client"
	"github.com/schedulerhq/scheduler/internal/httpx"
	"github.com/schedulerhq/scheduler/internal/namespace"
	"github.com/schedulerhq/scheduler/internal/outbound"
	"github.com/schedulerhq/scheduler/internal/store"
)

// Namespaces: GET /v1/namespaces (those the caller may read), GET and PUT
// /v1/namespaces/{ns} (PUT: admin only; creates it or sets its quotas).

func newNamespaceView(n store.Namespace, c store.NamespaceCounts) client.Namespace {
	v := client.Namespace{Name: n.Name, MaxJobs: n.MaxJobs, MaxConcurrentCalls: n.MaxConcurrentCalls,
		SQLTargets: n.SQLTargets, HTTPAllow: n.HTTPAllow, EnvSecrets: n.EnvSecrets,
		Jobs: c.Jobs, Secrets: c.Secrets, CreatedAt: n.CreatedAt.UTC(), UpdatedAt: n.UpdatedAt.UTC()}
	if n.MinInterval != nil {
		d := n.MinInterval.String()
		v.MinInterval = &d
	}
	return v
}

func (s *Server) listNamespaces(ctx context.Context, _ *struct{}) (*client.Namespaces, error) {
	readable := principal(ctx).Readable() // nil: every namespace
	if readable != nil && len(readable) == 0 {
		return &client.Namespaces{Namespaces: []client.Namespace{}}, nil
	}
	list, counts, err := s.cfg.DB.Namespaces(ctx, readable)
	if err != nil {
		return nil, err
	}
	views := make([]client.Namespace, len(list))
	for i, n := range list {
		views[i] = newNamespaceView(n, counts[n.Name])
	}
	return &client.Namespaces{Namespaces: views}, nil
}

// namespaceRoute is a {ns} route's request: the namespace it names.
type namespaceRoute struct{ ns string }

// Extract reads the namespace.
func (q *namespaceRoute) Extract(r *http.Request) error {
	q.ns = routeNamespace(r)
	return nil
}

func (s *Server) getNamespace(ctx context.Context, q *namespaceRoute) (*client.Namespace, error) {
	list, counts, err := s.cfg.DB.Namespaces(ctx, []string{q.ns})
	if err != nil {
		return nil, err
	}
	if len(list) == 0 {
		return nil, namespaceNotFoundProblem(q.ns)
	}
	v := newNamespaceView(list[0], counts[list[0].Name])
	return &v, nil
}

// errLoginsHeld ends a PUT's transaction whose targets' logins another namespace holds.
var errLoginsHeld = errors.New("a login is bound to another namespace")

// Bounds of a namespace's quotas.
const (
	maxNamespaceJobs  = 100_000
	maxNamespaceCalls = 10_000
	maxMinInterval    = 30 * 24 * time.Hour
)

// putNamespace creates namespace {ns} (201) or sets its quotas and outbound surface (200),
// with its audit row, in one transaction.
func (s *Server) putNamespace(w http.ResponseWriter, r *http.Request) {
	put, ok := s.readNamespacePut(w, r)
	if !ok {
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), queryTimeout)
	defer cancel()
	view, created, held, err := s.storeNamespace(ctx, r, put)
	switch {
	case errors.Is(err, errLoginsHeld):
		httpx.WriteProblem(w, r, http.StatusUnprocessableEntity, httpx.ProbInvalidRequest, "a SQL target's login serves one namespace; see errors", held...)
		return
	case err != nil:
		s.databaseProblem(w, r, err)
		return
	}
	ns := put.row.Name
	status := http.StatusOK
	if created {
		status = http.StatusCreated
		w.Header().Set("Location", "/v1/namespaces/"+ns)
	}
	s.cfg.Log.InfoContext(ctx, "namespace put", "namespace", ns, "created", created, "request_id", httpx.RequestID(ctx))
	httpx.WriteJSON(w, status, view)
}

// namespacePut is a checked PUT of a namespace: the row to store, the binding of its
// outbound surface, the sql_targets as sent (which a refusal's fields index), the reason.
type namespacePut struct {
	row        store.Namespace
	binding    outbound.Binding
	sqlTargets *[]string
	reason     *string
}

// readNamespacePut reads and checks a PUT of namespace {ns}, or answers 400 (the body, the
// reason) or 422 (every wrong field at once).
func (s *Server) readNamespacePut(w http.ResponseWriter, r *http.Request) (namespacePut, bool) {
	ns := routeNamespace(r)
	var fields []client.FieldError
	if !namespace.Valid(ns) {
		fields = append(fields, client.FieldError{Field: "namespace", Detail: fmt.Sprintf(
			"%q is not a namespace: want 1 to 63 lower-case letters, digits and '-', starting and ending with a letter or digit (e.g. billing)", ns)})
	}
	body, ok := httpx.ReadBody(w, r)
	if !ok {
		return namespacePut{}, false
	}
	// Its quotas, each optional (left out: unbounded), and its outbound surface
	// (internal/outbound; left out or null: as it is).
	var req client.NamespaceRequest
	if body != nil && !httpx.DecodeStrict(w, r, body, &req) {
		return namespacePut{}, false
	}
	n, quotaFields := namespaceQuotas(ns, req)
	fields = append(fields, quotaFields...)
	binding, problems := s.outbound.CheckBinding(ns, req.SQLTargets, req.HTTPAllow, req.EnvSecrets)
	for _, p := range problems {
		fields = append(fields, client.FieldError{Field: p.Field, Detail: p.Detail})
	}
	n.SQLTargets, n.HTTPAllow, n.EnvSecrets = binding.SQLTargets, binding.HTTPAllow, binding.EnvSecrets
	reason, ok := checkReason(w, r, &req.Reason)
	if !ok {
		return namespacePut{}, false
	}
	if len(fields) > 0 {
		httpx.WriteProblem(w, r, http.StatusUnprocessableEntity, httpx.ProbInvalidRequest, "the namespace has problems; see errors", fields...)
		return namespacePut{}, false
	}
	return namespacePut{row: n, binding: binding, sqlTargets: req.SQLTargets, reason: reason}, true
}

// namespaceQuotas is namespace ns's row with req's quotas, and what is wrong with them.
func namespaceQuotas(ns string, req client.NamespaceRequest) (store.Namespace, []client.FieldError) {
	var fields []client.FieldError
	n := store.Namespace{Name: ns, MaxJobs: req.MaxJobs, MaxConcurrentCalls: req.MaxConcurrentCalls}
	if v := req.MaxJobs; v != nil && (*v < 1 || *v > maxNamespaceJobs) {
		fields = append(fields, client.FieldError{Field: "max_jobs", Detail: fmt.Sprintf("want 1 to %d, or leave it out for no bound", maxNamespaceJobs)})
	}
	if v := req.MaxConcurrentCalls; v != nil && (*v < 1 || *v > maxNamespaceCalls) {
		fields = append(fields, client.FieldError{Field: "max_concurrent_calls", Detail: fmt.Sprintf("want 1 to %d, or leave it out for no bound", maxNamespaceCalls)})
	}
	if v := req.MinInterval; v != nil {
		d, err := time.ParseDuration(*v)
		if err != nil || d < time.Second || d > maxMinInterval {
			fields = append(fields, client.FieldError{Field: "min_interval", Detail: fmt.Sprintf(
				"%q is not a duration between 1s and %s (e.g. \"5m\"); leave it out for no bound", *v, maxMinInterval)})
		}
		n.MinInterval = &d
	}
	return n, fields
}

// storeNamespace stores the namespace, binds its SQL targets' logins and writes its audit
// row, in one transaction; created says it was new. A login another namespace holds ends
// it with errLoginsHeld, and held says which.
func (s *Server) storeNamespace(ctx context.Context, r *http.Request, put namespacePut) (view client.Namespace, created bool, held []client.FieldError, err error) {
	ns := put.row.Name
	err = s.cfg.DB.Atomically(ctx, func(ex store.Executor) error {
		out, c, err := ex.PutNamespace(ctx, put.row)
		if err != nil {
			return err
		}
		created = c
		if put.binding.SQLTargets != nil {
			holders, err := ex.BindSQLLogins(ctx, ns, put.binding.Logins)
			if err != nil {
				return err
			}
			if len(holders) > 0 {
				held = heldLogins(*put.sqlTargets, s.outbound, holders)
				return errLoginsHeld
			}
		}
		list, counts, err := ex.Namespaces(ctx, []string{ns})
		if err != nil {
			return err
		}
		view = newNamespaceView(out, counts[list[0].Name])
		a := s.actionIn(r, store.ActionNamespace, ns, put.reason)
		a.Detail, _ = json.Marshal(view)
		return ex.RecordAction(ctx, a)
	})
	return view, created, held, err
}

// heldLogins words the refusal of targets whose logins other namespaces hold: one field per
// entry of the request's sql_targets, naming the holder (an admin sees every namespace).
func heldLogins(names []string, p *outbound.Policy, held map[string]string) []client.FieldError {
	var fields []client.FieldError
	for i, name := range names {
		name = strings.ToUpper(name)
		login, _ := p.LoginOf(name)
		if holder, ok := held[login]; ok {
			fields = append(fields, client.FieldError{Field: fmt.Sprintf("sql_targets[%d]", i), Detail: fmt.Sprintf(
				"target %s connects as login %s, which namespace %s has bound: a login serves one namespace; unbind it there first, or have an operator declare a target with a login of its own",
				name, login, holder)})
		}
	}
	return fields
}
