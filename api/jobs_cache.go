package api

import (
	"context"
	"encoding/json"
	"sync"
	"sync/atomic"
	"time"

	"github.com/schedulerhq/scheduler/client"
	"github.com/schedulerhq/scheduler/internal/config"
	"github.com/schedulerhq/scheduler/internal/namespace"
	"github.com/schedulerhq/scheduler/internal/store"
)

// A replica's views of runtime jobs, kept between requests. Decoding and checking a stored
// definition, saying its schedule in words and finding its next slots cost more than
// reading the job's state. The list is paged (100 jobs by default), but its filters and
// health counts (?counts=true, which the console's overview and All namespaces pages poll)
// look at every job: at 10 000 jobs 160 ms with these views kept, 1.1 s without them
// (BenchmarkJobListCounts; 150 ms and 1.4 s for every namespace's). What
// they derive from is the definition's version, which every write bumps, so a list reads
// each job's name and version and decodes only the definitions it has not seen at that
// version. Every replica keeps its own: nothing is shared, and a version a replica has not
// seen yet is read from the database like any other.

// jobViews is the replica's cache of runtime jobs' views, by name.
type jobViews struct {
	mu     sync.Mutex
	byName map[string]*jobView
}

// jobView is what a runtime job's view derives from one version of its definition; it
// never changes once built, but for its memo of next runs.
type jobView struct {
	version int64
	ref     jobRef
	// static is the view without the job's state (paused, next runs, last run).
	static client.Job
	next   nextRunsMemo
	warn   warnMemo
	last   lastRunMemo
	// encoded is static's JSON members but the state's (staticJSON), once.
	encodeOnce sync.Once
	encoded    []byte
}

// nextRunsMemo keeps the next slots computed at some instant: they stay the answer until
// the first of them comes (a schedule's next slot after t is the same for every t before
// it), so a job on "* * * * *" computes them once a minute, not once a request.
type nextRunsMemo struct{ p atomic.Pointer[nextRuns] }

type nextRuns struct {
	from time.Time
	runs []time.Time
	// marks are the runs a clock change moved or doubled (views_calendar.go).
	marks []client.SlotDST
	// first, all and dst are runs[0], runs and marks in JSON, for the job list
	// (jobs_json.go).
	first, all, dst []byte
}

func (m *nextRunsMemo) load(j *config.Job, now time.Time) *nextRuns {
	if n := m.p.Load(); n != nil && !now.Before(n.from) && (len(n.runs) == 0 || now.Before(n.runs[0])) {
		return n
	}
	n := &nextRuns{from: now, runs: computeNextRuns(j, now)}
	n.marks = markRuns(j, n.runs)
	n.all, _ = json.Marshal(n.runs) // times in UTC always encode
	n.dst, _ = json.Marshal(n.marks)
	if len(n.runs) > 0 {
		n.first, _ = json.Marshal(n.runs[0])
	}
	m.p.Store(n)
	return n
}

// runtimeRefs returns namespace ns's runtime jobs after after (all when limit is 0, else up to limit),
// by name (everyNamespace: every namespace's, by namespace and name), with their cached
// views: one query of names and versions, and one of the definitions the replica has not
// seen at their current version.
func (s *Server) runtimeRefs(ctx context.Context, ns, after string, limit int) ([]*jobView, error) {
	var heads []store.DefinitionHead
	var err error
	if ns == everyNamespace {
		afterNS := ""
		if after != "" {
			afterNS = namespace.Of(after)
		}
		heads, err = s.cfg.DB.EveryDefinitionHeadAfter(ctx, afterNS, after, limitOrAll(limit))
	} else {
		heads, err = s.cfg.DB.DefinitionHeadsAfter(ctx, ns, after, limitOrAll(limit))
	}
	if err != nil {
		return nil, err
	}
	c := &s.runtimeViews
	out := make([]*jobView, len(heads))
	var missing []string
	c.mu.Lock()
	if c.byName == nil {
		c.byName = make(map[string]*jobView, len(heads))
	}
	for i, h := range heads {
		if v := c.byName[h.Name]; v != nil && v.version == h.Version {
			out[i] = v
		} else {
			missing = append(missing, h.Name)
		}
	}
	c.forget(ns, after, heads, limit)
	c.mu.Unlock()
	if len(missing) == 0 {
		return out, nil
	}

	stored, err := s.cfg.DB.DefinitionsNamed(ctx, missing)
	if err != nil {
		return nil, err
	}
	built := make(map[string]*jobView, len(stored))
	for _, sd := range stored {
		ref := runtimeJob(sd)
		built[sd.Name] = &jobView{version: sd.Version, ref: ref, static: staticJobView(&ref)}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	kept := out[:0]
	for i, h := range heads {
		v := out[i]
		if v == nil {
			// Deleted between the two reads: left out, as a list read a moment later would.
			if v = built[h.Name]; v == nil {
				continue
			}
			if old := c.byName[h.Name]; old == nil || old.version < v.version {
				c.byName[h.Name] = v
			}
		}
		kept = append(kept, v)
	}
	return kept, nil
}

// forget drops the cached jobs of namespace ns (everyNamespace: of any) that a read of the
// names after after (up to limit, 0: all) shows deleted: those in the range it covers that
// it did not return. Called with mu held.
func (c *jobViews) forget(ns, after string, heads []store.DefinitionHead, limit int) {
	seen := make(map[string]bool, len(heads))
	for _, h := range heads {
		seen[h.Name] = true
	}
	last := ""
	if limit > 0 && len(heads) == limit && len(heads) > 0 {
		last = heads[len(heads)-1].Name // the range ends there; beyond it, nothing is known
	}
	for name := range c.byName {
		inRange := (after == "" || compareKeys(name, after) > 0) && (last == "" || compareKeys(name, last) <= 0)
		if (ns == everyNamespace || namespace.Of(name) == ns) && inRange && !seen[name] {
			delete(c.byName, name)
		}
	}
}

func limitOrAll(limit int) int {
	if limit <= 0 {
		return 1<<31 - 1
	}
	return limit
}
