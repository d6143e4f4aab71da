package api

import (
	"container/list"
	"net"
	"net/http"
	"sync"

	"github.com/go-chi/chi/v5"
	"golang.org/x/time/rate"

	"github.com/schedulerhq/scheduler/internal/access"
	"github.com/schedulerhq/scheduler/internal/httpx"
	"github.com/schedulerhq/scheduler/internal/namespace"
	"github.com/schedulerhq/scheduler/internal/store"
)

// Refused requests (401, 403) are audited per caller: each caller has its own limiter, so
// one caller's flood of refusals fills its own allowance and never hides another caller's
// refusal. A caller is its token (by id) or, without a token it could be named by, its
// address (an IPv6 address by its /64, which one host usually holds whole).
//
// The callers are bounded (refusalCallersMax, least recently refused forgotten first) and
// so are all callers together (refusalsTotalPerSecond): a flood from many addresses can
// fill neither memory nor the audit log, and it takes that many callers at once, not one,
// to crowd another out.
const (
	refusalsPerSecond      = 1
	refusalsBurst          = 20
	refusalCallersMax      = 10_000
	refusalsTotalPerSecond = 50
	refusalsTotalBurst     = 500
)

// callerLimiter is a rate limiter per caller, for at most max callers.
type callerLimiter struct {
	mu      sync.Mutex
	every   rate.Limit
	burst   int
	max     int
	byKey   map[string]*list.Element
	recency *list.List // of *callerAllowance, most recently refused first
}

type callerAllowance struct {
	key     string
	limiter *rate.Limiter
}

func newCallerLimiter(every rate.Limit, burst, max int) *callerLimiter {
	return &callerLimiter{every: every, burst: burst, max: max, byKey: map[string]*list.Element{}, recency: list.New()}
}

// allow reports whether caller key may have one more refusal recorded now.
func (c *callerLimiter) allow(key string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.byKey[key]
	if ok {
		c.recency.MoveToFront(e)
	} else {
		if c.recency.Len() >= c.max {
			oldest := c.recency.Back()
			c.recency.Remove(oldest)
			delete(c.byKey, oldest.Value.(*callerAllowance).key)
		}
		e = c.recency.PushFront(&callerAllowance{key: key, limiter: rate.NewLimiter(c.every, c.burst)})
		c.byKey[key] = e
	}
	return e.Value.(*callerAllowance).limiter.Allow()
}

// refusalCaller names the caller of a refused request for its limiter.
func refusalCaller(r *http.Request) string {
	if p := principal(r.Context()); p.TokenID != "" {
		return "token:" + p.TokenID
	}
	host := remoteHost(r)
	if ip := net.ParseIP(host); ip != nil && ip.To4() == nil {
		host = ip.Mask(net.CIDRMask(64, 128)).String() + "/64"
	}
	return "addr:" + host
}

// refusalNamespace is the namespace whose audit log records a refusal: the route's when the
// caller may read it, else the caller's own (its one namespace), else none (the cluster's
// rows, which only those who read every namespace see). A refusal carries the caller's text
// (its path, its request id), so it never lands in a namespace the caller cannot read.
func refusalNamespace(r *http.Request) *string {
	p := principal(r.Context())
	if ns := chi.URLParam(r, "ns"); ns != "" && namespace.Valid(ns) && p.CanRead(ns) {
		return &ns
	}
	if len(p.Grants) == 1 && p.Grants[0].Namespace != access.AllNamespaces {
		ns := p.Grants[0].Namespace
		return &ns
	}
	return nil
}

// refused logs a request refused for its credentials or origin (401, 403) and records it in
// the audit log within its caller's allowance (callerLimiter) and the replica's: a flood of
// refusals must neither fill the audit log nor load the database, nor hide another
// caller's (the log line and scheduler_http_requests_total still count every one).
func (s *Server) refused(r *http.Request, why httpx.ProblemType) {
	kind := tokenKind(r.Context())
	if kind == "" {
		kind = tokenNone
		if r.Header.Get("Authorization") != "" {
			kind = tokenInvalid
		}
	}
	s.cfg.Log.WarnContext(r.Context(), "request refused", "why", why.Slug, "method", r.Method, "path", r.URL.Path,
		"host", r.Host, "token_kind", kind, "remote_addr", remoteHost(r), "request_id", httpx.RequestID(r.Context()))
	if !s.refusals.allow(refusalCaller(r)) || !s.allRefusals.Allow() {
		return
	}
	reason := oneLine(why.Slug+": "+r.Method+" "+r.URL.Path, maxReasonRunes)
	a := s.actionIn(r, store.ActionRefused, "", &reason)
	a.TokenKind = kind
	a.Namespace = refusalNamespace(r)
	s.record(r, a)
}
