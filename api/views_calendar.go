package api

import (
	"context"
	"encoding/json"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/schedulerhq/scheduler/client"
	"github.com/schedulerhq/scheduler/internal/config"
	"github.com/schedulerhq/scheduler/internal/schedule"
	"github.com/schedulerhq/scheduler/internal/store"
)

// What a job view shows of the job's future: whether its schedule is over (finished), its
// next runs with the slots a clock change moved or doubled, and the warnings of the clock
// changes of the next year (issue 33).

// coming is what a view shows of the job's future at one instant.
type coming struct {
	finished bool
	runs     []time.Time
	marks    []client.SlotDST
	warnings []string
	// next is the memo runs and marks come from, whole, for its encoded JSON; nil when they
	// were cut (the runs max_runs leaves) or there are none.
	next *nextRuns
	warn *warnings
}

// coming computes the job's future at now from its memos. ran is what ran of its slots:
// with max_runs, the runs left cut the next runs, and none left finish the job. A job
// finishes too when its schedule names no slot after now (a one-time job that ran, a window
// that ended). Next runs show while the job is enabled, unpaused and not finished;
// warnings while it is not finished.
func (jv *jobView) coming(now time.Time, paused bool, ran store.RanRuns) coming {
	co := coming{runs: []time.Time{}, marks: []client.SlotDST{}, warnings: []string{}}
	c := &jv.ref.conf
	if c.Schedule == nil || jv.ref.followsOnly() {
		return co // a job that runs only after its parents has no slot of its own, and never finishes
	}
	next := jv.next.load(c, now)
	left := -1
	if c.MaxRuns > 0 {
		left = max(c.MaxRuns-int(ran.Count), 0)
	}
	if co.finished = len(next.runs) == 0 || left == 0; co.finished {
		return co
	}
	if w := jv.warn.load(c.Schedule, now); len(w.list) > 0 {
		co.warnings, co.warn = w.list, w
	}
	if !c.Enabled || paused {
		return co
	}
	co.runs, co.marks, co.next = next.runs, next.marks, next
	if left >= 0 && left < len(next.runs) {
		co.runs, co.next = next.runs[:left], nil
		last := co.runs[left-1]
		co.marks = []client.SlotDST{}
		for _, m := range next.marks {
			if !m.At.After(last) {
				co.marks = append(co.marks, m)
			}
		}
	}
	return co
}

// appendJSON appends the members of co, as a Job encodes them, after a comma.
func (co *coming) appendJSON(b []byte) []byte {
	b = fmt.Appendf(b, `,"finished":%t,"next_run_at":`, co.finished)
	var first, runs, marks, warnings []byte
	if co.next != nil {
		first, runs, marks = co.next.first, co.next.all, co.next.dst
	} else {
		runs, _ = json.Marshal(co.runs) // times in UTC and strings always encode
		marks, _ = json.Marshal(co.marks)
		if len(co.runs) > 0 {
			first, _ = json.Marshal(co.runs[0])
		}
	}
	if first == nil {
		first = []byte("null")
	}
	if warnings = []byte("[]"); co.warn != nil {
		warnings = co.warn.json
	}
	b = append(b, first...)
	b = append(b, `,"next_runs":`...)
	b = append(b, runs...)
	b = append(b, `,"next_runs_dst":`...)
	b = append(b, marks...)
	b = append(b, `,"warnings":`...)
	return append(b, warnings...)
}

// markRuns marks the runs a clock change moved or doubled.
func markRuns(j *config.Job, runs []time.Time) []client.SlotDST {
	marks := []client.SlotDST{}
	for _, t := range runs {
		if m, ok := j.Schedule.Mark(t); ok {
			marks = append(marks, client.SlotDST{At: t, Change: m.Change, Note: m.Note})
		}
	}
	return marks
}

// warnMemo keeps a schedule's warnings from the instant they were computed until they may
// change (schedule.WarningsChange): months, for a zone with DST; for ever, for one without.
type warnMemo struct {
	p atomic.Pointer[warnings]
}

type warnings struct {
	from, until time.Time
	list        []string
	json        []byte
}

func (m *warnMemo) load(s *schedule.Schedule, now time.Time) *warnings {
	if w := m.p.Load(); w != nil && !now.Before(w.from) && (w.until.IsZero() || now.Before(w.until)) {
		return w
	}
	w := &warnings{from: now, until: s.WarningsChange(now), list: s.Warnings(now)}
	if w.list == nil {
		w.list = []string{}
	}
	w.json, _ = json.Marshal(w.list)
	m.p.Store(w)
	return w
}

// ranRuns reads what ran of the slots of the listed jobs that have max_runs: one query, and
// none when no job of the list has one.
func ranRuns(ctx context.Context, ex store.Executor, list []*jobView) (map[string]store.RanRuns, error) {
	var names []string
	for _, jv := range list {
		if jv.ref.conf.MaxRuns > 0 {
			names = append(names, jv.ref.conf.Name)
		}
	}
	if len(names) == 0 {
		return nil, nil
	}
	return ex.RanRuns(ctx, names)
}
