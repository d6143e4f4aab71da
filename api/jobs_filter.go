package api

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/schedulerhq/scheduler/client"
	"github.com/schedulerhq/scheduler/internal/httpx"
	"github.com/schedulerhq/scheduler/internal/namespace"
	"github.com/schedulerhq/scheduler/internal/store"
)

// The job list's filters and health counts (issue 34): what is failing, paused or running
// in a namespace, asked of the server, so the answer covers every job and not the page a
// console happens to hold. A filtered list reads the state of every job of the namespace
// (the runtime jobs' views come from the replica's cache), then pages what matches; an
// unfiltered one keeps reading its page's state only.

// jobListDefault is a job list's page without ?limit. Ten thousand jobs unpaged were a
// 12 MB answer that no reader takes in at once; a page of a hundred is a few milliseconds.
const jobListDefault = 100

// jobHealths are the values of ?status: failing (the last run failed, timed out or was
// abandoned), running (the last run is queued or running), paused, disabled.
var jobHealths = []string{"failing", "running", "paused", "disabled"}

var jobKinds = []string{"builtin", "http", "sql", "nats", "river"}

// jobListQuery is GET …/jobs's parameters.
type jobListQuery struct {
	limit  int
	after  string // the cursor's job name
	status string
	kind   string
	labels []labelMatch
	words  []string // ?q, lower-cased: every word in the name, kind, target or a label
	counts bool
	// every is ?namespace=*: every namespace's jobs (an admin's; jobs_every.go).
	every bool
}

// labelMatch is one ?label: key=value, or key alone (any value).
type labelMatch struct {
	key, value string
	anyValue   bool
}

// filtered reports whether the list needs every job's state.
func (f *jobListQuery) filtered() bool {
	return f.status != "" || f.kind != "" || len(f.labels) > 0 || len(f.words) > 0 || f.counts
}

// parseJobListQuery reads the parameters, returning every wrong one at once. ?namespace=* is
// GET /v1/jobs's only (nsRoute: the route names its namespace).
func parseJobListQuery(q url.Values, nsRoute bool) (jobListQuery, []client.FieldError) {
	var f jobListQuery
	var bad []client.FieldError
	n, limitErr := httpx.ParseLimit(q, jobListDefault, limitMax)
	if limitErr != nil {
		bad = append(bad, *limitErr)
	}
	f.limit = n
	if v := q.Get("cursor"); v != "" {
		name, ok := decodeJobCursor(v)
		if !ok {
			bad = append(bad, client.FieldError{Field: "cursor", Detail: "cursor must be a next_cursor returned by GET /v1/jobs"})
		}
		f.after = name
	}
	if f.status = q.Get("status"); f.status != "" && !slices.Contains(jobHealths, f.status) {
		bad = append(bad, client.FieldError{Field: "status", Detail: fmt.Sprintf("status must be one of %s; got %q", strings.Join(jobHealths, ", "), f.status)})
	}
	if f.kind = q.Get("kind"); f.kind != "" && !slices.Contains(jobKinds, f.kind) {
		bad = append(bad, client.FieldError{Field: "kind", Detail: fmt.Sprintf("kind must be one of %s; got %q", strings.Join(jobKinds, ", "), f.kind)})
	}
	for _, v := range q["label"] {
		key, value, hasValue := strings.Cut(v, "=")
		if strings.TrimSpace(key) == "" {
			bad = append(bad, client.FieldError{Field: "label", Detail: fmt.Sprintf("label must be key=value, or a key alone for any value; got %q", v)})
			continue
		}
		f.labels = append(f.labels, labelMatch{key: key, value: value, anyValue: !hasValue})
	}
	f.words = strings.Fields(strings.ToLower(q.Get("q")))
	switch v := q.Get("counts"); v {
	case "", "false":
	case "true":
		f.counts = true
	default:
		bad = append(bad, client.FieldError{Field: "counts", Detail: fmt.Sprintf("counts must be true or false; got %q", v)})
	}
	if q.Has("namespace") {
		if q.Get("namespace") == everyNamespace && !nsRoute {
			f.every = true
		} else {
			bad = append(bad, client.FieldError{Field: "namespace", Detail: "namespace may only be * on GET /v1/jobs (every namespace's jobs, for an admin); " +
				"GET /v1/namespaces/{ns}/jobs lists namespace {ns}'s jobs"})
		}
	}
	return f, bad
}

// badJobListQuery answers 400 with every wrong parameter: invalid-cursor when the cursor
// is the only one, as before the filters.
func badJobListQuery(w http.ResponseWriter, r *http.Request, bad []client.FieldError) {
	pt := httpx.ProbInvalidRequest
	if len(bad) == 1 && bad[0].Field == "cursor" {
		pt = probInvalidCursor
	}
	details := make([]string, len(bad))
	for i, b := range bad {
		details[i] = b.Detail
	}
	httpx.WriteProblem(w, r, http.StatusBadRequest, pt, strings.Join(details, "; "), bad...)
}

// jobHealth is the states a job is in, of jobHealths.
type jobHealth struct{ failing, running, paused, disabled bool }

func healthOf(jv *jobView, paused bool, last *store.Run) jobHealth {
	h := jobHealth{paused: paused, disabled: !jv.ref.enabled()}
	if last != nil {
		switch last.Status {
		case store.StatusFailed, store.StatusTimedOut, store.StatusAbandoned:
			h.failing = true
		case store.StatusQueued, store.StatusRunning:
			h.running = true
		}
	}
	return h
}

// countHealth counts a job of health h in c.
func countHealth(c *client.JobCounts, h jobHealth) {
	c.Total++
	for _, s := range []struct {
		in bool
		n  *int
	}{{h.failing, &c.Failing}, {h.running, &c.Running}, {h.paused, &c.Paused}, {h.disabled, &c.Disabled}} {
		if s.in {
			*s.n++
		}
	}
}

// matches reports whether the job passes every filter.
func (f *jobListQuery) matches(jv *jobView, h jobHealth) bool {
	v := &jv.static
	switch f.status {
	case "failing":
		if !h.failing {
			return false
		}
	case "running":
		if !h.running {
			return false
		}
	case "paused":
		if !h.paused {
			return false
		}
	case "disabled":
		if !h.disabled {
			return false
		}
	}
	if f.kind != "" && v.Kind != f.kind {
		return false
	}
	for _, l := range f.labels {
		got, ok := v.Labels[l.key]
		if !ok || (!l.anyValue && got != l.value) {
			return false
		}
	}
	if len(f.words) == 0 {
		return true
	}
	hay := []string{v.Name, kindWords[v.Kind], v.Target}
	for k, val := range v.Labels {
		hay = append(hay, k+"="+val)
	}
	text := strings.ToLower(strings.Join(hay, "\n"))
	for _, w := range f.words {
		if !strings.Contains(text, w) {
			return false
		}
	}
	return true
}

// kindWords are the kinds as the console says them, which ?q also finds.
var kindWords = map[string]string{"builtin": "built-in builtin", "http": "http", "sql": "sql", "nats": "nats", "river": "river"}

// listFilteredJobs answers GET …/jobs with filters or counts: every job of namespace ns
// (everyNamespace: of all of them) with its state, the page of those that match after
// f.after, and the counts when asked (per namespace too, for every namespace's).
func (s *Server) listFilteredJobs(w http.ResponseWriter, r *http.Request, ns string, f jobListQuery) {
	ctx, cancel := context.WithTimeout(r.Context(), queryTimeout)
	defer cancel()
	var all []*jobView
	if hasBuiltins(ns) {
		for _, j := range s.cfg.Jobs {
			ref := jobRef{conf: j}
			all = append(all, &jobView{ref: ref, static: staticJobView(&ref)})
		}
	}
	runtime, err := s.runtimeRefs(ctx, ns, "", 0)
	if err != nil {
		s.databaseProblem(w, r, err)
		return
	}
	all = append(all, runtime...)
	names := make([]string, len(all))
	for i, jv := range all {
		names[i] = jv.ref.conf.Name
	}
	now, paused, last, err := s.cfg.DB.JobStates(ctx, names)
	if err != nil {
		s.databaseProblem(w, r, err)
		return
	}
	start := startAfter(all, f.after)
	var counts client.JobCounts
	perNS := namespaceCounts{}
	var page []*jobView
	var next *string
	for i, jv := range all {
		name := jv.ref.conf.Name
		h := healthOf(jv, paused[name], last[name])
		countHealth(&counts, h)
		nsCounts := perNS.of(namespace.Of(name))
		countHealth(nsCounts, h)
		if !f.matches(jv, h) {
			continue
		}
		counts.Matched++
		nsCounts.Matched++
		switch {
		case i < start:
		case f.limit == 0 || len(page) < f.limit:
			page = append(page, jv)
		case next == nil:
			c := encodeJobCursor(page[len(page)-1].ref.conf.Name)
			next = &c
		}
	}
	ran, err := ranRuns(ctx, s.cfg.DB, page)
	var extra []byte
	if err == nil && f.counts {
		extra, err = countsJSON(counts, perNS, f.every)
	}
	if err == nil {
		err = writeJobList(w, page, now, paused, last, ran, next, extra)
	}
	if err != nil {
		s.databaseProblem(w, r, err)
	}
}

// startAfter is the index in all of the first job after the cursor's: the built-in jobs come
// in configuration order, then the runtime jobs by namespace and name (a cursor's job
// deleted since is passed by name).
func startAfter(all []*jobView, after string) int {
	if after == "" {
		return 0
	}
	for i, jv := range all {
		if jv.ref.conf.Name == after {
			return i + 1
		}
	}
	for i, jv := range all {
		if jv.ref.stored != nil && compareKeys(jv.ref.conf.Name, after) > 0 {
			return i
		}
	}
	return len(all)
}
