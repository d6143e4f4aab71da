// Package outbound decides what a namespace's jobs may reach outside the scheduler: the SQL
// targets they may name, the private addresses and hosts they may call, and the operator's
// environment secrets they may name. The operator declares what exists (SCHEDULER_SQL_TARGET_*,
// SCHEDULER_HTTP_ALLOW, SCHEDULER_SECRET_*); an admin gives each namespace its part (the
// namespace fields sql_targets, http_allow and env_secrets, PUT /v1/namespaces/{ns}).
//
// The rules (docs/design.md guarantee 13, docs/operations.md "Namespaces"):
//   - a job names only its namespace's SQL targets, and a target login serves one namespace
//     (scheduler_sql_logins), so one team's job never runs as another team's login;
//   - a job reaches a private address only where its namespace's http_allow allows it, and
//     every entry lies inside SCHEDULER_HTTP_ALLOW, which is checked too at every connection;
//   - a job names an environment secret only if an admin granted it to its namespace, and
//     never one whose value is a SQL target's password.
//
// A field never set (NULL, which only namespace default can be) keeps what default had
// before namespaces had a surface: every declared target whose login no other namespace has
// bound, the operator's whole allow list, and every environment secret but a target's
// password. So an existing single-team deployment works unchanged, and every other namespace
// starts with nothing.
//
// The same rules hold when a definition is checked (a 422 that lists what the namespace
// has) and when it runs (a stored definition whose binding was removed fails its run), since
// both ask a Surface read from the database at that moment.
package outbound

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/schedulerhq/scheduler/internal/namespace"
	"github.com/schedulerhq/scheduler/internal/store"
	"github.com/schedulerhq/scheduler/internal/targets"
)

// Store is what a Policy reads.
type Store interface {
	Namespace(ctx context.Context, name string) (store.Namespace, error)
	SQLLogins(ctx context.Context) (map[string]string, error)
}

// guardFreshFor is how long a namespace's guard read for one call serves the next ones. A
// slot's thousands of calls then read the namespace once, not once each (measured: a read
// per call took the 10 000-job slot's p99 from 0.6 s to 1.5 s), and an allowance taken
// away holds from at most a second later, as a revoked token does.
const guardFreshFor = time.Second

// Policy is the operator's side: what exists. It is safe for concurrent use.
type Policy struct {
	guard   *targets.Guard
	targets *targets.SQLTargets
	env     map[string]string // SCHEDULER_SECRET_<NAME> by NAME, as configured
	db      Store

	mu     sync.Mutex
	guards map[string]*guardEntry // by namespace: its guard as last read (GuardFor)
}

// guardEntry is one namespace's guard and when it was read; mu lets one call read it again
// while the others wait for that read instead of making their own.
type guardEntry struct {
	mu  sync.Mutex
	cur atomic.Pointer[readGuard]
}

type readGuard struct {
	guard *targets.Guard
	at    time.Time
}

// New makes the policy of the operator's guard (SCHEDULER_HTTP_ALLOW), declared SQL targets
// and environment secrets, read against db.
func New(guard *targets.Guard, sqlTargets *targets.SQLTargets, envSecrets map[string]string, db Store) *Policy {
	if guard == nil {
		guard, _ = targets.NewGuard(nil) // an empty list has no bad entry
	}
	return &Policy{guard: guard, targets: sqlTargets, env: envSecrets, db: db, guards: map[string]*guardEntry{}}
}

// OperatorSecrets are the environment secrets a namespace may be granted: every one set but
// those whose value is a SQL target's password, which no definition can ever name.
func (p *Policy) OperatorSecrets() map[string]string {
	out := make(map[string]string, len(p.env))
	for name, v := range p.env {
		if v != "" && !p.targets.IsPassword(v) {
			out[name] = v
		}
	}
	return out
}

// Surface is what one namespace's jobs may reach, as read at one moment.
type Surface struct {
	p      *Policy
	ns     store.Namespace
	logins map[string]string // every bound login → its namespace
	guard  *targets.Guard
}

// For reads namespace ns's surface.
func (p *Policy) For(ctx context.Context, ns string) (*Surface, error) {
	n, err := p.db.Namespace(ctx, ns)
	if err != nil {
		return nil, err
	}
	return p.Of(ctx, n)
}

// Of is the surface of namespace row n, which the caller has read.
func (p *Policy) Of(ctx context.Context, n store.Namespace) (*Surface, error) {
	logins, err := p.db.SQLLogins(ctx)
	if err != nil {
		return nil, err
	}
	return &Surface{p: p, ns: n, logins: logins, guard: p.guardOf(n)}, nil
}

// GuardFor is the outbound guard of namespace ns's calls (targets.Request.Guard), read at
// most guardFreshFor before the call, so an allowance taken away holds from a second later
// on. Without SCHEDULER_HTTP_ALLOW no namespace can be allowed anything, and the operator's
// guard is every namespace's: the database is not asked.
func (p *Policy) GuardFor(ctx context.Context, ns string) (*targets.Guard, error) {
	if len(p.guard.Entries()) == 0 {
		return p.guard, nil
	}
	p.mu.Lock()
	e := p.guards[ns]
	if e == nil {
		e = &guardEntry{}
		p.guards[ns] = e
	}
	p.mu.Unlock()
	if r := e.cur.Load(); r != nil && time.Since(r.at) < guardFreshFor {
		return r.guard, nil
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if r := e.cur.Load(); r != nil && time.Since(r.at) < guardFreshFor {
		return r.guard, nil // read by the call this one waited for
	}
	n, err := p.db.Namespace(ctx, ns)
	if err != nil {
		return nil, fmt.Errorf("read what namespace %s may call: %w", ns, err)
	}
	g := p.guardOf(n)
	e.cur.Store(&readGuard{guard: g, at: time.Now()})
	return g, nil
}

// guardOf is namespace n's outbound guard: the operator's for a default never set, else the
// operator's narrowed to the namespace's http_allow. An entry the operator has since taken
// out of SCHEDULER_HTTP_ALLOW is left out rather than failing every call of the namespace;
// the operator's list is checked at every connection anyway.
func (p *Policy) guardOf(n store.Namespace) *targets.Guard {
	if n.HTTPAllow == nil && n.Name == namespace.Default {
		return p.guard
	}
	var inside []string
	if n.HTTPAllow != nil {
		for _, e := range *n.HTTPAllow {
			if _, err := p.guard.Narrow(n.Name, []string{e}); err == nil {
				inside = append(inside, e)
			}
		}
	}
	g, err := p.guard.Narrow(n.Name, inside)
	if err != nil { // cannot happen: every entry passed alone
		g, _ = p.guard.Narrow(n.Name, nil)
	}
	return g
}

// Guard is the outbound guard of the namespace's definitions' URLs (definition.Env.CheckURL).
func (s *Surface) Guard() *targets.Guard { return s.guard }

// SQLTarget returns the target a job of the namespace names, or an error that says which
// targets the namespace has and who can bind another.
func (s *Surface) SQLTarget(name string) (*targets.SQLTarget, error) {
	if !s.usable(strings.ToUpper(name)) {
		return nil, s.refusal(name)
	}
	return s.p.targets.Lookup(name)
}

// CheckSQLTarget is SQLTarget's error alone (definition.Env.SQLTarget).
func (s *Surface) CheckSQLTarget(name string) error {
	_, err := s.SQLTarget(name)
	return err
}

// usable reports whether the namespace's jobs may name declared target name (upper case):
// bound to it, with its login bound to it, or, for a default never set, a target whose
// login no other namespace has bound.
func (s *Surface) usable(name string) bool {
	login, ok := s.p.targets.LoginOf(name)
	if !ok {
		return false
	}
	holder, held := s.logins[login]
	if s.ns.SQLTargets == nil {
		return s.ns.Name == namespace.Default && (!held || holder == s.ns.Name)
	}
	return slices.Contains(*s.ns.SQLTargets, name) && held && holder == s.ns.Name
}

// SQLTargetNames are the targets the namespace's jobs may name now, sorted.
func (s *Surface) SQLTargetNames() []string {
	var out []string
	for _, name := range s.p.targets.Names() {
		if s.usable(name) {
			out = append(out, name)
		}
	}
	return out
}

func (s *Surface) refusal(name string) error {
	ns := s.ns.Name
	bind := fmt.Sprintf(`an admin binds one with PUT /v1/namespaces/%s {"sql_targets": ["NAME"]}`, ns)
	names := s.SQLTargetNames()
	if len(names) == 0 {
		return fmt.Errorf("%q is not a SQL target of namespace %s, which has none: %s", name, ns, bind)
	}
	return fmt.Errorf("%q is not a SQL target of namespace %s; its targets: %s (%s)", name, ns, strings.Join(names, ", "), bind)
}
