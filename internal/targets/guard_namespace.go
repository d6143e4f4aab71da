package targets

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
)

// A namespace's jobs may reach a private address only where its http_allow allows it, and
// its http_allow lies inside the operator's SCHEDULER_HTTP_ALLOW: the operator bounds what
// any team may be given, an admin gives each team its part. Narrow makes that namespace's
// guard; the caller pools its connections apart from every other allowance's
// (Caller.clientFor), so a connection one namespace's allowance let through is never reused
// by a call of a namespace without it.

// Narrow returns the guard of namespace ns, whose http_allow is allow (SCHEDULER_HTTP_ALLOW's
// syntax). Every entry must lie inside g's own list: a CIDR inside one of g's, an address
// inside one of g's, a host name that g names. The error names every entry that does not, and
// says that the operator must allow it first. Every connection is checked against both
// lists, so a credentials address passes only where both name it.
func (g *Guard) Narrow(ns string, allow []string) (*Guard, error) {
	n, err := NewGuard(allow)
	if err != nil {
		return nil, fmt.Errorf("http_allow: %s", strings.TrimPrefix(err.Error(), "SCHEDULER_HTTP_ALLOW: "))
	}
	var outside []string
	for _, p := range n.allowPrefixes {
		if !slices.ContainsFunc(g.allowPrefixes, func(q netip.Prefix) bool { return q.Bits() <= p.Bits() && q.Contains(p.Addr()) }) {
			outside = append(outside, p.String())
		}
	}
	for h := range n.allowHosts {
		if !g.allowHosts[h] {
			outside = append(outside, h)
		}
	}
	if len(outside) > 0 {
		slices.Sort(outside)
		return nil, fmt.Errorf("%s not inside the operator's SCHEDULER_HTTP_ALLOW (%s): an operator must allow it there first",
			strings.Join(outside, ", "), g.describeAllow())
	}
	n.outer, n.lookup = g, g.lookup
	n.hint = fmt.Sprintf("an admin can allow it in namespace %s's http_allow (PUT /v1/namespaces/%s), inside the operator's SCHEDULER_HTTP_ALLOW", ns, ns)
	n.named = fmt.Sprintf("allowed only when namespace %s's http_allow and the operator's SCHEDULER_HTTP_ALLOW name it", ns)
	n.key = ns + ":" + strings.Join(n.Entries(), ",")
	return n, nil
}

// Entries are the guard's own allow list in its normal form, sorted.
func (g *Guard) Entries() []string {
	out := make([]string, 0, len(g.allowPrefixes)+len(g.allowHosts))
	for _, p := range g.allowPrefixes {
		if p.IsSingleIP() {
			out = append(out, p.Addr().String())
		} else {
			out = append(out, p.String())
		}
	}
	for h := range g.allowHosts {
		out = append(out, h)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

func (g *Guard) describeAllow() string {
	if e := g.Entries(); len(e) > 0 {
		return strings.Join(e, ", ")
	}
	return "empty"
}
