package schedule

import (
	"math/bits"
	"time"

	"github.com/robfig/cron/v3"
)

// CloserThan looks for two slots of the schedule less than floor apart, from `from` on,
// over GapHorizon (within the window): the namespace quota min_interval holds for a job's
// whole schedule set, not for the one gap around now. Walking every slot would cost one
// Next a slot (a 6-field spec has 86,400 a day), so the slots are reasoned about instead:
//
//   - A cron spec names the same times of day on every day it fires (its seconds, minutes
//     and hours fields); which specs fire on a day depends only on the date. The union's
//     gaps inside a day are therefore those of the union of the firing specs' times of day,
//     computed once per distinct union, and the gaps across midnight join one day's last
//     to the next firing day's first: a few operations a day.
//   - @every N names the multiples of N since the epoch: two of them come gcd(N, M) apart
//     somewhere (Bézout), and never closer; a cron slot's nearest @every slot is arithmetic
//     (mingap_every.go).
//   - Around each change of the zone's clocks, where DST policies move, double or drop
//     slots, the real slots (Next) are walked, a few minutes beyond the shift either side.
//   - @at slots are checked against their real neighbours.
//
// It stops at the first pair it finds, and reports it.
func (s *Schedule) CloserThan(from time.Time, floor time.Duration) (a, b time.Time, ok bool) {
	if floor <= time.Second {
		return // slots are whole seconds: two distinct ones are at least 1 s apart
	}
	g := &gapFinder{s: s, floor: int64(floor / time.Second)}
	start, end := from.Truncate(time.Second), from.Add(GapHorizon)
	if !s.from.IsZero() && s.from.After(start) {
		start = s.from
		end = start.Add(GapHorizon)
	}
	if !s.until.IsZero() && s.until.Before(end) {
		end = s.until
	}
	g.start, g.end = start.Unix(), end.Unix()
	g.parts = s.parts
	if g.parts == nil {
		g.parts = []*Schedule{s}
	}
	for _, p := range g.parts {
		switch spec, isCron := p.cron.(*cron.SpecSchedule); {
		case p.every > 0:
			g.every = append(g.every, int64(p.every/time.Second))
		case p.Once():
			g.at = append(g.at, p.at)
		case isCron && len(g.crons) < 64: // a day's specs are a 64-bit mask; lists hold at most 32
			g.crons = append(g.crons, spec)
		}
	}
	if g.everyPairs() || g.days() || g.ats() || g.changes() {
		return time.Unix(g.a, 0).UTC(), time.Unix(g.b, 0).UTC(), true
	}
	return time.Time{}, time.Time{}, false
}

// GapHorizon is how far CloserThan looks: a year of every month, weekday and clock change,
// with room for a year's drift of weekdays against dates.
const GapHorizon = 400 * 24 * time.Hour

// dstReach is how far beyond a clock change's shift, either side of it, the real slots are
// walked: the DST policies move, double or drop only the slots whose wall-clock times the
// shift skips or repeats, and beyond it every slot is where its wall-clock time says.
const dstReach = 10 * time.Minute

const daySeconds = 86400

// gapFinder holds one search; a and b are the pair found, in Unix seconds.
type gapFinder struct {
	s          *Schedule
	parts      []*Schedule
	floor      int64
	start, end int64
	crons      []*cron.SpecSchedule
	every      []int64
	at         []time.Time
	walks      [][2]int64 // around clock changes: intervals whose real slots are walked
	near       map[everyKey]nearPair
	classOf    []int                // each cron spec's class: its set of times among the distinct ones
	classes    []*daySet            // the distinct sets of times
	patterns   map[uint64]*dayTimes // unions of classes, by class mask
	a, b       int64
}

func (g *gapFinder) found(a, b int64) bool {
	if a > b {
		a, b = b, a
	}
	if b-a <= 0 || b-a >= g.floor || a < g.start || b > g.end {
		return false
	}
	g.a, g.b = a, b
	return true
}

// daySet is a set of times of day, a bit a second.
type daySet [daySeconds / 64]uint64

// timesOf is the set of times of day spec names (its seconds, minutes and hours fields).
func timesOf(spec *cron.SpecSchedule) *daySet {
	var set daySet
	for h := range 24 {
		for m := range 60 {
			if spec.Hour&(1<<h) == 0 || spec.Minute&(1<<m) == 0 {
				continue
			}
			for sec := range 60 {
				if spec.Second&(1<<sec) != 0 {
					t := h*3600 + m*60 + sec
					set[t/64] |= 1 << (t % 64)
				}
			}
		}
	}
	return &set
}

// dayTimes are the times of day (seconds after midnight) a set of cron specs names.
type dayTimes struct {
	set         daySet
	times       []int32 // the set's times in order, listed when first asked for (list)
	minA, minB  int32   // the closest consecutive pair, when there are two times
	first, last int32
	hasPair     bool
	empty       bool
}

// list is the pattern's times in order.
func (p *dayTimes) list() []int32 {
	if p.times == nil && !p.empty {
		for w, word := range p.set {
			for ; word != 0; word &= word - 1 {
				p.times = append(p.times, int32(w*64+bits.TrailingZeros64(word)))
			}
		}
	}
	return p.times
}

// pattern is the union of the times of day of the specs in mask. Specs that name the same
// times share one bit of the key (classes), so a year of days costs as many unions as
// there are distinct sets of times among them, not of specs.
func (g *gapFinder) pattern(mask uint64) *dayTimes {
	var key uint64
	for i := range g.crons {
		if mask&(1<<i) != 0 {
			key |= 1 << g.classOf[i]
		}
	}
	if p, ok := g.patterns[key]; ok {
		return p
	}
	p := &dayTimes{empty: true}
	for c, set := range g.classes {
		if key&(1<<c) != 0 {
			for w := range p.set {
				p.set[w] |= set[w]
			}
		}
	}
	prev := int32(-1)
	for w, word := range p.set {
		for ; word != 0; word &= word - 1 {
			t := int32(w*64 + bits.TrailingZeros64(word))
			if prev >= 0 && (!p.hasPair || t-prev < p.minB-p.minA) {
				p.minA, p.minB, p.hasPair = prev, t, true
			}
			if prev < 0 {
				p.first, p.empty = t, false
			}
			prev = t
		}
	}
	p.last = prev
	g.patterns[key] = p
	return p
}

// classify gives each cron spec its class: the index of its set of times among the
// distinct ones.
func (g *gapFinder) classify() {
	type fields struct{ second, minute, hour uint64 }
	seen := map[fields]int{}
	g.classOf = make([]int, len(g.crons))
	for i, spec := range g.crons {
		f := fields{spec.Second, spec.Minute, spec.Hour}
		c, ok := seen[f]
		if !ok {
			c = len(g.classes)
			seen[f] = c
			g.classes = append(g.classes, timesOf(spec))
		}
		g.classOf[i] = c
	}
	g.patterns = map[uint64]*dayTimes{}
}

// firing is the set of cron specs that fire on the date (y, m, d), as robfig decides it:
// with a * in day-of-month or day-of-week both must match, otherwise either.
func (g *gapFinder) firing(date time.Time) uint64 {
	var mask uint64
	for i, spec := range g.crons {
		if spec.Month&(1<<uint(date.Month())) == 0 {
			continue
		}
		dom := spec.Dom&(1<<uint(date.Day())) != 0
		dow := spec.Dow&(1<<uint(date.Weekday())) != 0
		const star = 1 << 63
		if spec.Dom&star != 0 || spec.Dow&star != 0 {
			if dom && dow {
				mask |= 1 << i
			}
		} else if dom || dow {
			mask |= 1 << i
		}
	}
	return mask
}

// days walks the dates of the horizon, the cron specs' slots a day at a time: a day whose
// clocks do not change and that lies wholly in range costs its pattern's first, last and
// closest pair, unless @every slots are to be compared with each of its times.
func (g *gapFinder) days() bool {
	if len(g.crons) == 0 {
		return false
	}
	g.classify()
	loc := g.s.loc
	y, m, d := time.Unix(g.start, 0).In(loc).Date()
	var prev int64 // the last cron slot met, 0 before the first
	for i := 0; ; i++ {
		date := time.Date(y, m, d+i, 0, 0, 0, 0, time.UTC) // the calendar date alone
		if date.Unix()-15*3600 > g.end {                   // no zone is 15 h behind UTC
			return false
		}
		mask := g.firing(date)
		p := g.pattern(mask)
		if p.empty {
			continue
		}
		local := time.Date(y, m, d+i, 0, 0, 0, 0, loc)
		next := time.Date(y, m, d+i+1, 0, 0, 0, 0, loc)
		c, changes := nextChange(loc, local.Add(-3*time.Hour), next)
		var dayStart, cs, reach int64
		if !changes {
			_, off := local.Zone()
			dayStart = date.Unix() - int64(off)
		} else {
			reach = int64((dstReach + c.shift()) / time.Second)
			if _, twice := nextChange(loc, c.at, next); twice {
				// Two changes in a day (no zone has them today): walk the whole day.
				g.walks = append(g.walks, [2]int64{local.Unix() - reach, next.Unix() + reach})
				continue
			}
			g.walks = append(g.walks, [2]int64{c.at.Unix() - reach, c.at.Unix() + reach})
			dayStart = date.Unix() - int64(c.before)
			cs = c.at.Unix() - dayStart
		}
		if !changes && dayStart >= g.start && dayStart+daySeconds <= g.end {
			if prev != 0 && g.found(prev, dayStart+int64(p.first)) ||
				p.hasPair && g.found(dayStart+int64(p.minA), dayStart+int64(p.minB)) {
				return true
			}
			for _, n := range g.every {
				if t, e, ok := g.nearEvery(p, mask, n, dayStart); ok && g.found(dayStart+t, dayStart+e) {
					return true
				}
			}
			prev = dayStart + int64(p.last)
			continue
		}
		for _, t := range p.list() {
			at := dayStart + int64(t)
			if changes {
				switch {
				case int64(t) < cs-reach: // before the change: the offset before it
				case int64(t) > cs+reach:
					at -= int64(c.after - c.before)
				default:
					continue // near the change: walked (changes)
				}
			}
			if at < g.start || at > g.end {
				continue
			}
			if prev != 0 && g.found(prev, at) {
				return true
			}
			prev = at
			for _, n := range g.every {
				if r := at - floorDiv(at, n)*n; r != 0 && (g.found(at-r, at) || g.found(at, at-r+n)) {
					return true
				}
			}
		}
	}
}

// ats compares each one-time slot with its real neighbours.
func (g *gapFinder) ats() bool {
	for _, at := range g.at {
		if at.Unix() < g.start || at.Unix() > g.end {
			continue
		}
		if p := g.s.Prev(at.Add(-time.Second)); !p.IsZero() && g.found(p.Unix(), at.Unix()) {
			return true
		}
		if n := g.s.Next(at); !n.IsZero() && g.found(at.Unix(), n.Unix()) {
			return true
		}
	}
	return false
}

// changes walks the real slots around each change of the clocks days found, where the DST
// policies move, double or drop slots: from the last slot before the walk to the first
// after it, so that every gap touching it is seen.
func (g *gapFinder) changes() bool {
	for _, w := range g.walks {
		lo, hi := max(w[0], g.start), min(w[1], g.end)
		if lo > hi {
			continue
		}
		cur := g.s.Prev(time.Unix(lo, 0))
		if cur.IsZero() || cur.Unix() < g.start {
			cur = g.s.Next(time.Unix(g.start-1, 0))
		}
		if cur.IsZero() {
			continue
		}
		// The union's slots merged from each spec's own, one Next a slot rather than one
		// a spec: the same slots as Next, which asks every spec each time.
		heads := make([]time.Time, len(g.parts))
		for i, p := range g.parts {
			heads[i] = p.nextAny(cur)
		}
		for cur.Unix() <= hi {
			var next time.Time
			for _, h := range heads {
				if !h.IsZero() && (next.IsZero() || h.Before(next)) {
					next = h
				}
			}
			if next.IsZero() || next.Unix() > g.end {
				break
			}
			if g.found(cur.Unix(), next.Unix()) {
				return true
			}
			for i, h := range heads {
				if h.Equal(next) {
					heads[i] = g.parts[i].nextAny(next)
				}
			}
			cur = next
		}
	}
	return false
}
