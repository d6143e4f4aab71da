package api

import (
	"cmp"
	"encoding/json"
	"net/http"
	"slices"
	"strings"

	"github.com/go-chi/chi/v5"

	"github.com/schedulerhq/scheduler/client"
	"github.com/schedulerhq/scheduler/internal/access"
	"github.com/schedulerhq/scheduler/internal/namespace"
)

// Every namespace's jobs in one list (GET /v1/jobs?namespace=*), for an admin who looks
// after every team: what is failing, paused or running across them, with the same filters,
// paging and counts as one namespace's list, and the counts per namespace. The built-in
// jobs come first, as in namespace default's list, then the runtime jobs by namespace and
// name.

// everyNamespace is ?namespace='s value for every namespace, and the list's scope for it.
const everyNamespace = "*"

// hasBuiltins reports whether a list of namespace ns holds the built-in jobs (namespace
// default's).
func hasBuiltins(ns string) bool { return ns == namespace.Default || ns == everyNamespace }

// compareKeys orders job keys as the lists do: by namespace, then by key (within one
// namespace, by key alone).
func compareKeys(a, b string) int {
	return cmp.Or(strings.Compare(namespace.Of(a), namespace.Of(b)), strings.Compare(a, b))
}

// mayListJobs guards GET …/jobs: ?namespace=* on /v1/jobs is an admin's; anything else
// needs a viewer's grant on the route's namespace (mayRead). A caller refused the wildcard
// is told which lists it may read instead.
func (s *Server) mayListJobs(next http.Handler) http.Handler {
	read := s.mayRead(next)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if chi.URLParam(r, "ns") != "" || r.URL.Query().Get("namespace") != everyNamespace {
			read.ServeHTTP(w, r)
			return
		}
		p := principal(r.Context())
		if !p.IsAdmin() {
			s.forbid(w, r, "list every namespace's jobs (?namespace=*): only an admin may; "+readableLists(p))
			return
		}
		next.ServeHTTP(w, r)
	})
}

// readableLists says which job lists p may read.
func readableLists(p access.Principal) string {
	ns := p.Readable()
	if p.ReadsAll() {
		return "it may read every namespace: GET /v1/namespaces lists them, GET /v1/namespaces/{ns}/jobs each one's jobs"
	}
	if len(ns) == 0 {
		return "it may read no namespace"
	}
	lists := make([]string, len(ns))
	for i, n := range ns {
		lists[i] = "GET /v1/namespaces/" + n + "/jobs"
	}
	return "it may read " + strings.Join(lists, ", ")
}

// namespaceCounts are the counts of each namespace a list meets.
type namespaceCounts map[string]*client.NamespaceJobCounts

func (m namespaceCounts) of(ns string) *client.JobCounts {
	c := m[ns]
	if c == nil {
		c = &client.NamespaceJobCounts{Namespace: ns}
		m[ns] = c
	}
	return &c.JobCounts
}

// countsJSON is the answer's counts members: "counts", and "namespace_counts" by namespace
// for a list of every namespace's jobs.
func countsJSON(total client.JobCounts, perNS namespaceCounts, every bool) ([]byte, error) {
	b, err := json.Marshal(total)
	if err != nil {
		return nil, err
	}
	out := append([]byte(`"counts":`), b...)
	if !every {
		return out, nil
	}
	list := make([]*client.NamespaceJobCounts, 0, len(perNS))
	for _, c := range perNS {
		list = append(list, c)
	}
	slices.SortFunc(list, func(a, b *client.NamespaceJobCounts) int { return strings.Compare(a.Namespace, b.Namespace) })
	if b, err = json.Marshal(list); err != nil {
		return nil, err
	}
	out = append(out, `,"namespace_counts":`...)
	return append(out, b...), nil
}
