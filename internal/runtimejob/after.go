package runtimejob

import (
	"fmt"
	"slices"
	"strings"

	"github.com/schedulerhq/scheduler/internal/namespace"
	"github.com/schedulerhq/scheduler/internal/schedule"
)

// `after`: a job that runs when its parents succeed (docs/runtime-jobs.md, "after"). The
// definition's own check (after) sees only the names; AfterGraph checks them against the
// namespace's other jobs (missing parents, cycles, depth), which the API reads for it. The
// runs themselves are made where runs end (internal/store/after.go).

const (
	// MaxParents bounds a job's parents: every end of a parent run reads them all.
	MaxParents = 10
	// MaxChainDepth bounds the jobs on one chain, the first parent to the last child: an
	// end walks no further, and a chain longer than this is a workflow, not a schedule.
	MaxChainDepth = 10
)

// noSlots is the schedule of a job that only follows its parents: a one-time slot long
// past, so that the engine's timers, catch-up and slot audit, which all read a schedule,
// find nothing to do for it, and no code path needs a nil check.
var noSlots = func() *schedule.Schedule {
	s, err := schedule.New([]string{"@at 1970-01-01T00:00:00Z"}, schedule.Options{})
	if err != nil {
		panic(err)
	}
	return s
}()

// after checks the names of the job's parents: its namespace's job names, at most
// MaxParents, each once, never the job itself.
func (c *checker) after(j *Checked) {
	d := &j.Def
	if len(d.After) > MaxParents {
		c.fail("after", "%d parents; at most %d", len(d.After), MaxParents)
		return
	}
	seen := map[string]bool{}
	for i, p := range d.After {
		field := fmt.Sprintf("after[%d]", i)
		switch {
		case strings.Contains(p, "/"):
			c.fail(field, "%q names a job of another namespace: a parent is a job of the job's own namespace, named without its namespace (e.g. extract)", p)
		case !namespace.Valid(p):
			c.fail(field, "%q is not a job name: want 1 to 63 lower-case letters, digits and '-' (e.g. extract)", p)
		case p == d.Name:
			c.fail(field, "a job cannot follow itself: %s → %s", p, p)
		case seen[p]:
			c.fail(field, "%q is named twice; name each parent once", p)
		}
		seen[p] = true
	}
	if !j.FollowsOnly {
		return
	}
	// What shapes a schedule's slots means nothing without one: refused, not ignored.
	for _, f := range []struct {
		field string
		set   bool
	}{{"max_runs", d.MaxRuns > 0}, {"start_at", d.StartAt != ""}, {"end_at", d.EndAt != ""}, {"dst", d.DST != nil}, {"time_zone", d.TimeZone != ""}} {
		if f.set {
			c.fail(f.field, "shapes a schedule's slots; a job with only parents (after) has none: leave %s out, or give the job a schedule", f.field)
		}
	}
}

// Parents is the job's parents as job keys (namespace.Key), the first parent first.
func (d *Definition) Parents() []string {
	keys := make([]string, len(d.After))
	ns := namespace.Of(d.Key())
	for i, p := range d.After {
		keys[i] = namespace.Key(ns, p)
	}
	return keys
}

// AfterGraph checks the parents of the job key against its namespace's jobs: jobs maps
// each of them (by key, the job itself left out or as stored) to its parents' keys. It
// reports every parent that does not exist, the cycle the parents would close, and a
// chain longer than MaxChainDepth, each naming the jobs involved.
func AfterGraph(key string, parents []string, jobs map[string][]string) Errors {
	var errs Errors
	g := make(map[string][]string, len(jobs)+1)
	for k, ps := range jobs {
		g[k] = ps
	}
	g[key] = parents
	_, name := namespace.Split(key)
	for i, p := range parents {
		if _, ok := jobs[p]; !ok && p != key {
			_, pn := namespace.Split(p)
			errs = append(errs, FieldError{Field: fmt.Sprintf("after[%d]", i), Message: fmt.Sprintf(
				"no job %q in namespace %s; define it first, or remove it from after", pn, namespace.Of(key))})
		}
	}
	for i, p := range parents {
		if path := pathTo(g, p, key, map[string]bool{}); path != nil {
			// path runs from p up to key through parents; in run order it reads key → ... → p → key.
			chain := []string{name}
			for j := len(path) - 1; j >= 0; j-- {
				_, n := namespace.Split(path[j])
				chain = append(chain, n)
			}
			chain = append(chain, name)
			errs = append(errs, FieldError{Field: fmt.Sprintf("after[%d]", i), Message: fmt.Sprintf(
				"would make a cycle: %s; a chain must end", strings.Join(chain, " → "))})
		}
	}
	if len(errs) > 0 {
		return errs
	}
	up := longest(g, key, func(k string) []string { return g[k] }, map[string][]string{})
	children := map[string][]string{}
	for k, ps := range g {
		for _, p := range ps {
			children[p] = append(children[p], k)
		}
	}
	down := longest(g, key, func(k string) []string { return children[k] }, map[string][]string{})
	if n := len(up) + len(down) - 1; n > MaxChainDepth {
		chain := slices.Clone(up)
		slices.Reverse(chain)
		chain = append(chain, down[1:]...)
		for i, k := range chain {
			_, chain[i] = namespace.Split(k)
		}
		errs = append(errs, FieldError{Field: "after", Message: fmt.Sprintf(
			"the chain would be %d jobs long: %s; at most %d", n, strings.Join(chain, " → "), MaxChainDepth)})
	}
	return errs
}

// pathTo is a path from 'from' to 'to' following parents (from first, to excluded), or nil.
func pathTo(g map[string][]string, from, to string, seen map[string]bool) []string {
	if from == to {
		return []string{}
	}
	if seen[from] {
		return nil
	}
	seen[from] = true
	for _, p := range g[from] {
		if rest := pathTo(g, p, to, seen); rest != nil {
			return append([]string{from}, rest...)
		}
	}
	return nil
}

// longest is the longest path from k following next (k first), in a graph without cycles.
// memo keeps each job's answer: a namespace's jobs may share parents many ways, and
// without it the walk would follow every path.
func longest(g map[string][]string, k string, next func(string) []string, memo map[string][]string) []string {
	if p, ok := memo[k]; ok {
		return p
	}
	var best []string
	for _, n := range next(k) {
		if _, ok := g[n]; !ok {
			continue // a missing parent: reported apart
		}
		if p := longest(g, n, next, memo); len(p) > len(best) {
			best = p
		}
	}
	memo[k] = append([]string{k}, best...)
	return memo[k]
}
