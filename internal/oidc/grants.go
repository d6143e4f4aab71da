package oidc

import (
	"slices"
	"strings"

	"github.com/schedulerhq/scheduler/internal/config"
)

// Grant is one role on one namespace; Namespace "*" is every namespace.
type Grant struct {
	Namespace string
	Role      string // config.RoleViewer, config.RoleEditor or config.RoleAdmin
}

// grantsFor returns the grants of every binding whose subject glob matches subject, in
// binding order, each grant once.
func grantsFor(bindings []config.OIDCBinding, subject string) []Grant {
	var grants []Grant
	for _, b := range bindings {
		g := Grant{Namespace: b.Namespace, Role: b.Role}
		if globMatch(b.Subject, subject) && !slices.Contains(grants, g) {
			grants = append(grants, g)
		}
	}
	return grants
}

// globMatch reports whether s matches pattern as a whole, where '*' matches any run of
// characters (':' included, so system:serviceaccount:billing:* covers every service
// account of billing) and every other character stands for itself. The pieces between
// stars are found leftmost-first, which is exact when '*' is the only wildcard, and takes
// time linear in len(s) for each piece rather than backtracking.
func globMatch(pattern, s string) bool {
	pieces := strings.Split(pattern, "*")
	if len(pieces) == 1 {
		return pattern == s
	}
	first, last := pieces[0], pieces[len(pieces)-1]
	if !strings.HasPrefix(s, first) {
		return false
	}
	s = s[len(first):]
	for _, piece := range pieces[1 : len(pieces)-1] {
		i := strings.Index(s, piece)
		if i < 0 {
			return false
		}
		s = s[i+len(piece):]
	}
	return strings.HasSuffix(s, last)
}
