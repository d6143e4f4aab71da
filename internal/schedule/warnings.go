package schedule

import (
	"fmt"
	"slices"
	"time"
)

// Warnings say, for each change of the schedule's clocks after now and within a year, what
// the schedule does that day, when its DST policy decides something: a wall-clock time it
// names that does not exist, or that happens twice, and what the other policies would do
// instead. A change the policies all treat alike (an hourly job loses nothing in a gap: its
// 03:00 runs either way) and one outside the window warn of nothing. A window that opens
// after now is looked at from its start: its first year is what a preview needs. Each
// warning starts with the change's local date:
//
//	2027-03-28: 02:30 Europe/Paris does not exist (clocks go forward); with dst.gap=skip that day has no run; dst.gap=shift runs it at 03:00
func (s *Schedule) Warnings(now time.Time) []string {
	parts := s.cronParts()
	if len(parts) == 0 {
		return nil
	}
	if s.from.After(now) {
		now = s.from
	}
	limit := now.UTC().AddDate(1, 0, 0) // a year in UTC, as WarningsChange counts it
	var out []string
	for at := now; ; {
		c, ok := nextChange(s.loc, at, limit)
		if !ok {
			return out
		}
		at = c.at
		var w string
		if c.forward() {
			w = s.gapWarning(c, parts)
		} else {
			w = s.repeatWarning(c)
		}
		if w != "" {
			out = append(out, w)
		}
	}
}

// cronParts are the schedule's cron expressions, the only specs a clock change moves.
func (s *Schedule) cronParts() []*Schedule {
	parts := s.parts
	if parts == nil {
		parts = []*Schedule{s}
	}
	var out []*Schedule
	for _, p := range parts {
		if p.cron != nil && p.every == 0 && !p.Once() {
			out = append(out, p)
		}
	}
	return out
}

func (s *Schedule) gapWarning(c clockChange, parts []*Schedule) string {
	var times []time.Time
	for _, p := range parts {
		times = append(times, p.gapTimes(c, maxGapTimes)...)
	}
	if len(times) == 0 {
		return ""
	}
	slices.SortFunc(times, time.Time.Compare)
	times = slices.CompactFunc(times, time.Time.Equal)
	skip := s.withDST(DST{Gap: GapSkip, Repeat: s.dst.Repeat})
	shift := s.withDST(DST{Gap: GapShift, Repeat: s.dst.Repeat})
	if !isSlot(shift, c.at) || isSlot(skip, c.at) {
		return "" // the instant after the gap runs either way, or lies outside the window
	}
	local := c.at.In(s.loc)
	dayStart := time.Date(local.Year(), local.Month(), local.Day(), 0, 0, 0, 0, s.loc)
	noRun := len(slotsIn(skip, dayStart, dayStart.AddDate(0, 0, 1), 1)) == 0
	verb, them := existence(len(times))
	head := fmt.Sprintf("%s: %s %s (clocks go forward)", localDate(c.at, s.loc), s.wallList(times, c.before), verb)
	if s.dst.gap() == GapShift {
		runs, left := "it runs", "leave it out"
		if len(times) > 1 {
			runs, left = "they run once", "leave them out"
		}
		if noRun {
			left = "leave that day without a run"
		}
		return fmt.Sprintf("%s; with dst.gap=shift %s at %s; dst.gap=skip would %s", head, runs, wall(local), left)
	}
	lost := "that day has no run"
	if !noRun {
		lost += " at " + walls(times, time.FixedZone("", c.before))
	}
	return fmt.Sprintf("%s; with dst.gap=skip %s; dst.gap=shift runs %s at %s", head, lost, them, wall(local))
}

func (s *Schedule) repeatWarning(c clockChange) string {
	from, to := c.at.Add(-c.shift()), c.at.Add(c.shift())
	policies := []string{RepeatFirst, RepeatLast, RepeatBoth}
	runs := map[string][]time.Time{}
	for _, r := range policies {
		runs[r] = slotsIn(s.withDST(DST{Gap: s.dst.Gap, Repeat: r}), from, to, maxGapTimes)
	}
	if slices.Equal(runs[RepeatFirst], runs[RepeatLast]) && slices.Equal(runs[RepeatLast], runs[RepeatBoth]) {
		return ""
	}
	// The repeated times are those of "both"'s first instants, before the change.
	var firsts []time.Time
	for _, t := range runs[RepeatBoth] {
		if t.Before(c.at) {
			firsts = append(firsts, t)
		}
	}
	if len(firsts) == 0 {
		return ""
	}
	verb := "happens twice"
	if len(firsts) > 1 {
		verb = "happen twice"
	}
	cur := s.dst.repeat()
	text := fmt.Sprintf("%s: %s %s (clocks go back); with dst.repeat=%s it runs %s",
		localDate(c.at, s.loc), s.wallList(firsts, c.before), verb, cur, describeRuns(runs[cur]))
	for _, r := range policies {
		if r != cur {
			text += fmt.Sprintf("; dst.repeat=%s %s", r, describeRuns(runs[r]))
		}
	}
	return text
}

// describeRuns says how many runs there are and when, in UTC: "once, at 00:30 UTC",
// "twice, at 00:30 and 01:30 UTC", "60 times, from 00:00 to 01:59 UTC".
func describeRuns(runs []time.Time) string {
	switch n := len(runs); {
	case n == 0:
		return "not at all"
	case n == 1:
		return "once, at " + walls(runs, time.UTC) + " UTC"
	case n == 2:
		return "twice, at " + walls(runs, time.UTC) + " UTC"
	case n <= maxListed:
		return fmt.Sprintf("%d times, at %s UTC", n, walls(runs, time.UTC))
	default:
		return fmt.Sprintf("%d times, from %s UTC", n, walls(runs, time.UTC))
	}
}

func isSlot(s *Schedule, at time.Time) bool { return s.Next(at.Add(-time.Second)).Equal(at) }

// slotsIn lists up to max slots of s in [from, to).
func slotsIn(s *Schedule, from, to time.Time, max int) []time.Time {
	var out []time.Time
	for n := s.Next(from.Add(-time.Second)); !n.IsZero() && n.Before(to) && len(out) < max; n = s.Next(n) {
		out = append(out, n)
	}
	return out
}

// WarningsChange is the first instant after now at which Warnings may say something else:
// the next clock change (its warning goes), or the first change of the year after now minus
// a year (it comes into the year); zero when they never change. A caller may keep the
// warnings until then.
func (s *Schedule) WarningsChange(now time.Time) time.Time {
	if len(s.cronParts()) == 0 {
		return time.Time{}
	}
	if s.from.After(now) {
		return s.from // until the window opens, the warnings are those of its first year
	}
	var until time.Time
	if c, ok := nextChange(s.loc, now, now.Add(horizon)); ok {
		until = c.at
	}
	year := now.UTC().AddDate(1, 0, 0)
	if c, ok := nextChange(s.loc, year, year.Add(horizon)); ok {
		if t := c.at.UTC().AddDate(-1, 0, 0); until.IsZero() || t.Before(until) {
			until = t
		}
	}
	return until
}
