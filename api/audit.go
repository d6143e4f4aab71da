package api

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/schedulerhq/scheduler/client"
	"github.com/schedulerhq/scheduler/internal/httpx"
	"github.com/schedulerhq/scheduler/internal/namespace"
	"github.com/schedulerhq/scheduler/internal/store"
)

// auditCursorScope ties audit cursors to this route, so a run-history cursor is refused here;
// a filtered list's cursors also carry its filters (auditScope).
const auditCursorScope = "audit"

// auditActions are the actions an audit row may name (store.Action*), for ?action=.
var auditActions = []string{store.ActionTrigger, store.ActionCancel, store.ActionPause, store.ActionResume,
	store.ActionStepDown, store.ActionRefused, store.ActionCreate, store.ActionUpdate, store.ActionDelete,
	store.ActionAutoPause, store.ActionFailover, store.ActionNamespace, store.ActionTokenCreate,
	store.ActionTokenRevoke, store.ActionSecretPut, store.ActionSecretDelete, store.ActionRerun,
	store.ActionBackfill, store.ActionBackfillCancel, store.ActionOIDCRotate, store.ActionDrain}

// maxTokenFilter bounds ?token=: a token's id, name or kind is far shorter.
const maxTokenFilter = 200

func (s *Server) listAudit(w http.ResponseWriter, r *http.Request) {
	q, ok := httpx.QueryParams(w, r)
	if !ok {
		return
	}
	// A caller who may not read every namespace reads its namespaces' rows only.
	p := principal(r.Context())
	f := store.ActionFilter{Namespaces: p.Readable()}
	if ns := q.Get("namespace"); ns != "" {
		if !p.CanRead(ns) {
			s.forbid(w, r, "read this namespace's audit log")
			return
		}
		f.Namespaces = []string{ns}
	}
	f, fields := auditFilter(q, f)
	if len(fields) > 0 {
		httpx.WriteProblem(w, r, http.StatusBadRequest, httpx.ProbInvalidRequest, auditFilterDetail(fields), fields...)
		return
	}
	limit, ok := httpx.QueryLimit(w, r, q, limitDefault, limitMax)
	if !ok {
		return
	}
	scope := auditScope(f)
	if v := q.Get("cursor"); v != "" {
		id, ok := decodeCursor(v, scope)
		if !ok {
			httpx.FieldProblem(w, r, probInvalidCursor, "cursor", "cursor must be a next_cursor returned by GET /v1/audit with the same filters")
			return
		}
		f.BeforeID = id
	}
	ctx, cancel := context.WithTimeout(r.Context(), queryTimeout)
	defer cancel()
	f.Limit = limit + 1
	list, err := s.cfg.DB.Actions(ctx, f)
	if err != nil {
		s.databaseProblem(w, r, err)
		return
	}
	var next *string
	if len(list) > limit {
		list = list[:limit]
		c := encodeCursor(list[len(list)-1].ID, scope)
		next = &c
	}
	views := make([]client.Action, len(list))
	for i, a := range list {
		views[i] = client.Action{ID: a.ID, At: a.At.UTC(), Action: a.Action, Job: a.Job, RunID: a.RunID, Namespace: a.Namespace,
			TokenKind: a.TokenKind, TokenID: a.TokenID, TokenName: a.TokenName, Reason: a.Reason, RequestID: a.RequestID,
			RemoteAddr: a.RemoteAddr, Detail: a.Detail}
		if a.Job != nil {
			_, name := namespace.Split(*a.Job)
			views[i].Job = &name
		}
	}
	httpx.WriteJSON(w, http.StatusOK, client.ActionPage{Actions: views, NextCursor: next})
}

// auditFilter reads ?job=, ?action=, ?token=, ?since= and ?until= into f, and lists every
// value it refuses at once.
func auditFilter(q url.Values, f store.ActionFilter) (store.ActionFilter, []client.FieldError) {
	var fields []client.FieldError
	bad := func(field, detail string) { fields = append(fields, client.FieldError{Field: field, Detail: detail}) }
	if f.Job = q.Get("job"); f.Job != "" && !namespace.Valid(f.Job) {
		bad("job", fmt.Sprintf("job must be a job's name (lower-case letters, digits and '-'); got %q", f.Job))
	}
	if f.Action = q.Get("action"); f.Action != "" && !slices.Contains(auditActions, f.Action) {
		bad("action", fmt.Sprintf("action must be one of %s; got %q", strings.Join(auditActions, ", "), f.Action))
	}
	if f.Token = q.Get("token"); utf8.RuneCountInString(f.Token) > maxTokenFilter || !utf8.ValidString(f.Token) || strings.ContainsRune(f.Token, 0) {
		bad("token", fmt.Sprintf("token must be a token's id, name or kind: valid UTF-8 without NUL of at most %d characters", maxTokenFilter))
	}
	for _, t := range []struct {
		name string
		dst  **time.Time
	}{{"since", &f.Since}, {"until", &f.Until}} {
		if v := q.Get(t.name); v != "" {
			at, err := time.Parse(time.RFC3339Nano, v)
			if err != nil {
				bad(t.name, fmt.Sprintf("%s must be an RFC 3339 time such as 2025-01-31T02:00:00Z; got %q", t.name, v))
				continue
			}
			*t.dst = &at
		}
	}
	if f.Since != nil && f.Until != nil && !f.Since.Before(*f.Until) {
		bad("since", fmt.Sprintf("since (%s) is not before until (%s); the range would be empty",
			f.Since.Format(time.RFC3339Nano), f.Until.Format(time.RFC3339Nano)))
	}
	return f, fields
}

// auditFilterDetail is the problem's detail for the refused filters.
func auditFilterDetail(fields []client.FieldError) string {
	if len(fields) == 1 {
		return fields[0].Detail
	}
	return fmt.Sprintf("%d filters are not valid; errors lists each", len(fields))
}

// auditScope is the cursor scope of an audit list: its filters' fingerprint, so a cursor
// reused with other filters is refused instead of skipping rows.
func auditScope(f store.ActionFilter) string {
	if f.Job == "" && f.Action == "" && f.Token == "" && f.Since == nil && f.Until == nil {
		return auditCursorScope
	}
	return auditCursorScope + "-" + filterFingerprint(store.RunFilter{Job: f.Job, Status: f.Action, Trigger: f.Token, Since: f.Since, Until: f.Until})
}

// action is the audit row of an action the request takes: the caller records it with
// store.Executor.RecordAction in the action's own transaction, so that no action commits
// unaudited.
func (s *Server) action(r *http.Request, action, job string, reason *string) store.Action {
	ns := ""
	if job != "" {
		ns = namespace.Of(job)
	}
	a := s.actionIn(r, action, ns, reason)
	if job != "" {
		a.Job = &job
	}
	return a
}

// actionIn is the audit row of an action in namespace ns ("": the cluster's own).
func (s *Server) actionIn(r *http.Request, action, ns string, reason *string) store.Action {
	p := principal(r.Context())
	a := store.Action{Action: action, TokenKind: p.Kind, Reason: reason,
		RequestID: httpx.RequestID(r.Context()), RemoteAddr: remoteHost(r)}
	if p.TokenID != "" {
		a.TokenID, a.TokenName = &p.TokenID, &p.TokenName
	}
	if ns != "" {
		a.Namespace = &ns
	}
	return a
}

// record appends a, with the request's id and address, to the audit log; a failure is
// logged, not answered (refusals are recorded this way, outside any transaction).
func (s *Server) record(r *http.Request, a store.Action) {
	a.RequestID, a.RemoteAddr = httpx.RequestID(r.Context()), remoteHost(r)
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), queryTimeout)
	defer cancel()
	if err := s.cfg.DB.RecordAction(ctx, a); err != nil {
		s.cfg.Log.ErrorContext(ctx, "operator action not recorded in the audit log", "error", err, "action", a.Action,
			"job", a.Job, "run_id", a.RunID, "token_kind", a.TokenKind, "reason", a.Reason, "request_id", a.RequestID,
			"remote_addr", a.RemoteAddr)
	}
}

// remoteHost is the client's address as this replica sees it (a proxy's, behind one: the
// request id then links the row to the proxy's log).
func remoteHost(r *http.Request) string {
	if host, _, err := net.SplitHostPort(r.RemoteAddr); err == nil {
		return host
	}
	return r.RemoteAddr
}

// actionReason reads the optional {"reason": "..."} body of an action (client.ReasonRequest),
// or answers 400.
func actionReason(w http.ResponseWriter, r *http.Request) (*string, bool) {
	body, ok := httpx.ReadBody(w, r)
	if !ok {
		return nil, false
	}
	var req client.ReasonRequest
	if body != nil && !httpx.DecodeStrict(w, r, body, &req) {
		return nil, false
	}
	return checkReason(w, r, &req.Reason)
}

// reasonHeader is the header that carries the reason of a runtime job's create, replace or
// delete, whose body is the definition (or none): UTF-8, percent-encoded as
// encodeURIComponent writes it, so that any reason fits in a header.
const reasonHeader = "X-Reason"

// headerReason reads the optional X-Reason header, or answers 400.
func headerReason(w http.ResponseWriter, r *http.Request) (*string, bool) {
	v := r.Header.Get(reasonHeader)
	if v == "" {
		return nil, true
	}
	reason, err := url.PathUnescape(v)
	if err != nil {
		httpx.FieldProblem(w, r, httpx.ProbInvalidRequest, reasonHeader, "X-Reason must be percent-encoded UTF-8 (as encodeURIComponent writes it), such as incident%207; "+err.Error())
		return nil, false
	}
	return checkReason(w, r, &reason)
}

// checkReason drops an empty reason (so a body's reason left out, null or "" is none) and refuses one that is too long or not UTF-8.
func checkReason(w http.ResponseWriter, r *http.Request, reason *string) (*string, bool) {
	reason, p := validReason(reason)
	if p != nil {
		httpx.WriteProblemFor(w, r, p)
		return nil, false
	}
	return reason, true
}

// reasonProblem says what is wrong with a reason, or "". PostgreSQL stores no NUL in text:
// such a reason is the client's mistake, not a 503.
func reasonProblem(reason *string) string {
	if reason != nil && (utf8.RuneCountInString(*reason) > maxReasonRunes || !utf8.ValidString(*reason) || strings.ContainsRune(*reason, 0)) {
		return fmt.Sprintf("reason must be valid UTF-8 without NUL (\\u0000) of at most %d characters", maxReasonRunes)
	}
	return ""
}

// oneLine keeps the first n runes of s, valid UTF-8 and without NUL (which PostgreSQL
// refuses in text: a refused request for a path with %00 went unaudited), as a reason
// column takes. A NUL is written %00, as the client sent it.
func oneLine(s string, n int) string {
	s = strings.ReplaceAll(strings.ToValidUTF8(s, "?"), "\x00", "%00")
	if r := []rune(s); len(r) > n {
		return string(r[:n])
	}
	return s
}
