package schedule

import (
	"fmt"
	"strings"
	"time"

	"github.com/robfig/cron/v3"
)

// DST is what a cron schedule does when its zone's clocks change. A cron expression names
// wall-clock times; when clocks go forward some of them do not exist that day (the gap),
// and when they go back some happen twice (the repeat). @every and @at name instants, and
// no policy changes them.
type DST struct {
	// Gap is GapSkip (the default: no slot for a time that does not exist) or GapShift (a
	// slot at the first instant after the gap instead; several times in one gap make one).
	Gap string
	// Repeat is RepeatFirst (the default: the first of the two instants, as Parse
	// describes), RepeatLast (the second only) or RepeatBoth (both, a shift apart).
	Repeat string
}

// The policies' names, as definitions write them.
const (
	GapSkip     = "skip"
	GapShift    = "shift"
	RepeatFirst = "first"
	RepeatLast  = "last"
	RepeatBoth  = "both"
)

// How a clock change made a slot, in Mark.
const (
	MarkMoved   = "moved"   // the slot is at another instant than its wall-clock time's first
	MarkDoubled = "doubled" // the slot is one of two for one wall-clock time
)

func (d DST) gap() string {
	if d.Gap == "" {
		return GapSkip
	}
	return d.Gap
}

func (d DST) repeat() string {
	if d.Repeat == "" {
		return RepeatFirst
	}
	return d.Repeat
}

// isDefault reports the policy Parse describes, whose slots stay exactly those the code
// before policies computed: it keeps that path, bit for bit.
func (d DST) isDefault() bool { return d.gap() == GapSkip && d.repeat() == RepeatFirst }

// nextCronDST is Next for a cron schedule under a policy other than the default: robfig's
// slots (every instant whose wall-clock time the expression names, both of a repeated
// one) without those the repeat policy drops, and with gap=shift the instants just after a
// gap in which the expression names a time. Both sets are fixed, so Next stays monotonic
// and Prev's bisection over it stays exact.
func (s *Schedule) nextCronDST(t time.Time) time.Time {
	n := s.cron.Next(t)
	for !n.IsZero() && s.dropped(n) {
		n = s.cron.Next(n)
	}
	if s.dst.gap() == GapShift {
		if g := s.nextShifted(t, n); !g.IsZero() {
			n = g
		}
	}
	if n.IsZero() {
		return time.Time{}
	}
	return n.UTC()
}

// dropped reports whether the repeat policy leaves out robfig's slot n.
func (s *Schedule) dropped(n time.Time) bool {
	switch s.dst.repeat() {
	case RepeatLast:
		_, ok := s.firstOfRepeat(n)
		return ok
	case RepeatBoth:
		return false
	}
	return s.repeatsWallClock(n)
}

// clockChange is a change of a zone's offset at an instant.
type clockChange struct {
	at            time.Time
	before, after int // offsets east of UTC, seconds
}

func (c clockChange) forward() bool { return c.after > c.before }

// shift is how far the clocks jump, either way.
func (c clockChange) shift() time.Duration {
	return time.Duration(max(c.after-c.before, c.before-c.after)) * time.Second
}

// nextChange returns the first change of loc's offset after t and not after limit.
func nextChange(loc *time.Location, t, limit time.Time) (clockChange, bool) {
	for {
		_, end := t.In(loc).ZoneBounds()
		if end.IsZero() || end.After(limit) {
			return clockChange{}, false
		}
		_, before := t.In(loc).Zone()
		_, after := end.In(loc).Zone()
		if before != after { // not a change of the zone's name alone
			return clockChange{at: end, before: before, after: after}, true
		}
		t = end
	}
}

// firstOfRepeat reports whether n is the first instant of a wall-clock time that happens
// twice, and the change that repeats it.
func (s *Schedule) firstOfRepeat(n time.Time) (clockChange, bool) {
	c, ok := nextChange(s.loc, n, n.Add(12*time.Hour)) // no change shifts clocks by more
	if !ok || c.forward() || c.at.Sub(n) > c.shift() {
		return clockChange{}, false
	}
	return c, true
}

// secondOfRepeat reports whether n is the second instant of a wall-clock time that happens
// twice, and the change that repeats it.
func (s *Schedule) secondOfRepeat(n time.Time) (clockChange, bool) {
	c, ok := nextChange(s.loc, n.Add(-12*time.Hour), n)
	if !ok {
		return clockChange{}, false
	}
	// The latest change at or before n: another may follow the first within 12 hours.
	for d, more := nextChange(s.loc, c.at, n); more; d, more = nextChange(s.loc, d.at, n) {
		c = d
	}
	if c.forward() || n.Sub(c.at) >= c.shift() {
		return clockChange{}, false
	}
	return c, true
}

// changeAt returns the change of the zone's offset at exactly t, if there is one.
func (s *Schedule) changeAt(t time.Time) (clockChange, bool) {
	c, ok := nextChange(s.loc, t.Add(-time.Second), t)
	return c, ok && c.at.Equal(t)
}

// nextShifted returns the first instant after t, and before limit (when not zero), that
// ends a gap in which the expression names a wall-clock time.
func (s *Schedule) nextShifted(t, limit time.Time) time.Time {
	if limit.IsZero() {
		limit = t.Add(horizon)
	}
	for at := t; ; {
		c, ok := nextChange(s.loc, at, limit)
		if !ok || !c.at.Before(limit) {
			return time.Time{}
		}
		if c.forward() && len(s.gapTimes(c, 1)) > 0 {
			return c.at.UTC()
		}
		at = c.at
	}
}

// gapTimes lists, up to max, the wall-clock times the expression names in the gap of the
// forward change c, as instants of the offset before it (a gap's times exist on no clock of
// the zone). The expression is asked in that fixed offset, where they exist.
func (s *Schedule) gapTimes(c clockChange, max int) []time.Time {
	spec, ok := s.cron.(*cron.SpecSchedule)
	if !ok || !c.forward() {
		return nil
	}
	fixed := *spec
	fixed.Location = time.FixedZone("", c.before)
	end := c.at.Add(c.shift())
	var out []time.Time
	for n := fixed.Next(c.at.Add(-time.Second)); !n.IsZero() && n.Before(end) && len(out) < max; n = fixed.Next(n) {
		out = append(out, n)
	}
	return out
}

// regular reports whether slot is one of robfig's slots the repeat policy keeps.
func (s *Schedule) regular(slot time.Time) bool {
	n := s.cron.Next(slot.Add(-time.Second))
	return n.Equal(slot) && !s.dropped(n)
}

// Mark says how a clock change made slot, one of the schedule's: moved (the gap's times
// shifted to it, or a repeated time's second instant kept alone) or doubled (a repeated
// time that runs at both instants), with a note in words. It reports false for a slot no
// policy made: the default policy moves or doubles nothing.
func (s *Schedule) Mark(slot time.Time) (SlotMark, bool) {
	if s.parts != nil {
		var mark SlotMark
		found := false
		for _, p := range s.parts {
			if m, ok := p.Mark(slot); ok && !found {
				mark, found = m, true
			} else if !ok && p.nextAny(slot.Add(-time.Second)).Equal(slot) {
				return SlotMark{}, false // another spec names it anyway
			}
		}
		return mark, found
	}
	if s.cron == nil || s.dst.isDefault() {
		return SlotMark{}, false
	}
	if c, ok := s.changeAt(slot); ok && s.dst.gap() == GapShift && c.forward() && !s.regular(slot) {
		if times := s.gapTimes(c, maxGapTimes); len(times) > 0 {
			verb, them := existence(len(times))
			return SlotMark{Change: MarkMoved, Note: fmt.Sprintf("%s %s on %s (clocks go forward): dst.gap=shift runs %s at %s",
				s.wallList(times, c.before), verb, localDate(c.at, s.loc), them, wall(c.at.In(s.loc)))}, true
		}
	}
	switch s.dst.repeat() {
	case RepeatLast:
		if c, ok := s.secondOfRepeat(slot); ok && s.repeatsWallClock(slot) {
			return s.repeatMark(MarkMoved, c, slot, "dst.repeat=last runs at the second only"), true
		}
	case RepeatBoth:
		if c, ok := s.secondOfRepeat(slot); ok && s.repeatsWallClock(slot) {
			return s.repeatMark(MarkDoubled, c, slot, "dst.repeat=both runs at both, "+short(c.shift())+" apart"), true
		}
		if c, ok := s.firstOfRepeat(slot); ok && s.repeatsWallClock(slot.Add(c.shift())) {
			return s.repeatMark(MarkDoubled, c, slot, "dst.repeat=both runs at both, "+short(c.shift())+" apart"), true
		}
	}
	return SlotMark{}, false
}

// SlotMark is Mark's answer.
type SlotMark struct {
	Change string // MarkMoved or MarkDoubled
	Note   string // what the change did, in words
}

func (s *Schedule) repeatMark(change string, c clockChange, slot time.Time, what string) SlotMark {
	return SlotMark{Change: change, Note: fmt.Sprintf("%s %s happens twice on %s (clocks go back): %s",
		wall(slot.In(s.loc)), s.loc, localDate(c.at, s.loc), what)}
}

// maxListed is how many times a note lists one by one; more are written as a range.
const maxListed = 4

// maxGapTimes bounds the times a gap is searched for: a gap lasts at most a few hours, and
// a 6-field expression names at most one time a second.
const maxGapTimes = 10_000

// wallList writes times (instants at a fixed offset) as the zone's wall-clock times:
// "02:30 Europe/Paris", "02:00, 02:20 and 02:40 Europe/Paris", "02:00 to 02:59 Europe/Paris".
func (s *Schedule) wallList(times []time.Time, offset int) string {
	return walls(times, time.FixedZone("", offset)) + " " + s.loc.String()
}

// walls writes times as wall-clock times in loc: "02:30", "00:30 and 01:30", "02:00 to 02:59".
func walls(times []time.Time, loc *time.Location) string {
	if len(times) > maxListed {
		return wall(times[0].In(loc)) + " to " + wall(times[len(times)-1].In(loc))
	}
	out := make([]string, len(times))
	for i, t := range times {
		out[i] = wall(t.In(loc))
	}
	return joinWords(out)
}

// wall is a wall-clock time, with its seconds when it has some.
func wall(t time.Time) string {
	if t.Second() != 0 {
		return t.Format("15:04:05")
	}
	return t.Format("15:04")
}

// localDate is the date of t in loc, as the warnings name a day.
func localDate(t time.Time, loc *time.Location) string { return t.In(loc).Format(time.DateOnly) }

// short writes a duration without zero units ("1h", "30m").
func short(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// existence says the gap's times do not exist, and what shift does with them.
func existence(n int) (verb, them string) {
	if n == 1 {
		return "does not exist", "it"
	}
	return "do not exist", "them once"
}
