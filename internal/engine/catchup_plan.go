package engine

import (
	"time"

	"github.com/schedulerhq/scheduler/internal/schedule"
)

// The catch-up's decisions (docs/design.md guarantee 3), apart from its reads and writes
// (catchup.go): what slots one job's catch-up looks at, and, from the rows found there,
// which slot runs, which are recorded missed and which are left to the failover repair.
// Pure functions of the schedule, the window, now and the rows: tests check them without a
// database.

// catchUpJob is one job as the catch-up plan sees it.
type catchUpJob struct {
	sched *schedule.Schedule
	// since is when this version of the job's definition took effect (zero for a built-in
	// job): the slots before it were another schedule's.
	since time.Time
	// first is the job's earliest recorded slot (zero: none): no gap is looked for before it.
	first time.Time
	// window is the job's catch-up window (0: the latest slot is never caught up).
	window time.Duration
	// maxMissed bounds the slots looked at besides the latest.
	maxMissed int
	// repairFrom, after a failover, is where the repair's slots start (zero: no repair).
	repairFrom time.Time
}

// inRepair reports whether slot s is the failover repair's to decide.
func (j catchUpJob) inRepair(s time.Time) bool {
	return !j.repairFrom.IsZero() && !s.Before(j.repairFrom)
}

// catchUpWalk returns the slots the catch-up looks at, newest first: walking back from now
// over at most maxMissed+1 slots (every slot from repairFrom on besides) and not before the
// job's first recorded slot, so gaps inside the walk are found, not only the tail after the
// latest row, and a long outage costs the cap, not one step per period. Nil when there is
// no slot yet or the latest came before since.
func catchUpWalk(j catchUpJob, now time.Time) []time.Time {
	latest := j.sched.Prev(now)
	if latest.IsZero() || latest.Before(j.since) {
		return nil
	}
	first := j.first
	if first.Before(j.since) {
		first = j.since
	}
	// A job that never recorded a slot has no known gap before its latest slot.
	walk := []time.Time{latest}
	before := func(s time.Time) time.Time { return j.sched.Prev(s.Add(-time.Second)) }
	for s := before(latest); !first.IsZero() && !s.IsZero() && !s.Before(first) && (len(walk) <= j.maxMissed || j.inRepair(s)); s = before(s) {
		walk = append(walk, s)
	}
	return walk
}

// catchUpPlan is what the catch-up decided for one job.
type catchUpPlan struct {
	latest time.Time
	run    bool        // the latest slot runs, with trigger catch-up
	missed []time.Time // recorded missed, oldest first
	repair []time.Time // left to the failover repair, oldest first
}

// planCatchUp decides a walk's slots given those recorded (by Unix second): the latest,
// when unrecorded and within the catch-up window, runs once; every other unrecorded slot is
// recorded missed, but those from repairFrom on, which the repair decides.
func planCatchUp(j catchUpJob, walk []time.Time, recorded map[int64]bool, now time.Time) catchUpPlan {
	p := catchUpPlan{latest: walk[0]}
	p.run = !recorded[p.latest.Unix()] && !j.inRepair(p.latest) && j.window > 0 && now.Sub(p.latest) <= j.window
	for i := len(walk) - 1; i >= 0; i-- { // oldest first, the order they came due
		s := walk[i]
		switch {
		case recorded[s.Unix()] || (i == 0 && p.run):
		case j.inRepair(s):
			p.repair = append(p.repair, s)
		default:
			p.missed = append(p.missed, s)
		}
	}
	return p
}
