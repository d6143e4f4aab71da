// Package access says what a caller of the API may do. A caller is a Principal: who it is
// (a token stored through the API, one of the environment's tokens, or a service account
// signed in through OIDC) and its grants, each a role in one namespace or in all of them.
// The API asks it before every route acts; nothing else decides.
package access

import (
	"slices"

	"github.com/schedulerhq/scheduler/internal/namespace"
)

// Roles, weakest first: a viewer reads a namespace, an editor also defines, changes,
// triggers, pauses and deletes its jobs and manages its secrets, and an admin does all of
// that everywhere and alone touches built-in jobs, namespaces, tokens and leadership.
const (
	RoleViewer = "viewer"
	RoleEditor = "editor"
	RoleAdmin  = "admin"
)

// AllNamespaces is a grant's namespace when it covers every namespace.
const AllNamespaces = "*"

// Kinds of principal, as the audit log records them (token_kind).
const (
	KindEnvAdmin = "full"      // SCHEDULER_API_TOKEN
	KindEnvNext  = "full-next" // SCHEDULER_API_TOKEN_NEXT
	KindEnvRead  = "read"      // SCHEDULER_API_READ_TOKEN
	KindToken    = "token"     // a token made through POST /v1/tokens
	KindOIDC     = "oidc"      // a service account's JWT
	KindNone     = "none"      // a replica with no token configured (loopback only)
)

// Grant is a role in a namespace (or in AllNamespaces).
type Grant struct {
	Namespace string `json:"namespace"`
	Role      string `json:"role"`
}

// Principal is an authenticated caller.
type Principal struct {
	Kind string
	// TokenID and TokenName name the credential in the audit log: a stored token's id and
	// name, the environment variable's name, or the service account's subject.
	TokenID, TokenName string
	Grants             []Grant
}

// Admin is the principal of the environment's full token, and of a replica without tokens.
func Admin(kind, id, name string) Principal {
	return Principal{Kind: kind, TokenID: id, TokenName: name, Grants: []Grant{{AllNamespaces, RoleAdmin}}}
}

func rank(role string) int {
	switch role {
	case RoleViewer:
		return 1
	case RoleEditor:
		return 2
	case RoleAdmin:
		return 3
	}
	return 0
}

// ValidRole reports whether role names a role.
func ValidRole(role string) bool { return rank(role) > 0 }

// has reports whether a grant gives at least role in ns.
func (p Principal) has(ns, role string) bool {
	for _, g := range p.Grants {
		if (g.Namespace == AllNamespaces || g.Namespace == ns) && rank(g.Role) >= rank(role) {
			return true
		}
	}
	return false
}

// CanRead reports whether p may read namespace ns: its jobs, runs, secrets' names and audit.
func (p Principal) CanRead(ns string) bool { return p.has(ns, RoleViewer) }

// CanEdit reports whether p may change namespace ns's jobs and secrets and trigger them.
func (p Principal) CanEdit(ns string) bool { return p.has(ns, RoleEditor) }

// IsAdmin reports whether p may touch everything: built-in jobs, namespaces, tokens and
// leadership.
func (p Principal) IsAdmin() bool { return p.has(AllNamespaces, RoleAdmin) }

// ReadsAll reports whether p may read every namespace.
func (p Principal) ReadsAll() bool { return p.has(AllNamespaces, RoleViewer) }

// CanReadBuiltin reports whether p may read the built-in jobs, which live in namespace
// default, and the cluster's locks.
func (p Principal) CanReadBuiltin() bool { return p.CanRead(namespace.Default) }

// CanActOnBuiltin reports whether p may trigger, pause or resume a built-in job.
func (p Principal) CanActOnBuiltin() bool { return p.IsAdmin() }

// Readable lists the namespaces p may read, in grant order without repeats; nil when p
// reads all of them.
func (p Principal) Readable() []string {
	if p.ReadsAll() {
		return nil
	}
	var out []string
	for _, g := range p.Grants {
		if rank(g.Role) > 0 && !slices.Contains(out, g.Namespace) {
			out = append(out, g.Namespace)
		}
	}
	return out
}

// MayChangeSomething reports whether p is an editor or an admin anywhere.
func (p Principal) MayChangeSomething() bool {
	for _, g := range p.Grants {
		if rank(g.Role) >= rank(RoleEditor) {
			return true
		}
	}
	return false
}
