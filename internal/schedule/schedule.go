// Package schedule parses job schedules and computes their slots.
//
// A slot is a nominal run time, in whole seconds UTC, that every replica
// derives from the expression alone (never from its own clock), so that
// `(job, scheduled_at)` names the same run on every replica and the unique
// index on job_runs can make each slot run at most once cluster-wide.
package schedule

import (
	"fmt"
	"strings"
	"time"

	"github.com/robfig/cron/v3"
)

// horizon is how far Parse and Prev look for a slot. robfig/cron's Next gives
// up after five years too, so a schedule is "never firing" by the same rule
// in both directions.
const horizon = 5 * 366 * 24 * time.Hour

// prevWindows are the look-back windows Prev tries in turn. Most schedules
// have a slot in the first one or two, so the common case costs a few Next
// calls; rare schedules (yearly, leap day) still resolve within the horizon.
var prevWindows = []time.Duration{
	time.Minute,
	time.Hour,
	24 * time.Hour,
	32 * 24 * time.Hour,
	366 * 24 * time.Hour,
	4 * 366 * 24 * time.Hour,
	horizon,
}

const validForms = `a 5-field cron expression such as "0 2 * * *", a 6-field one with seconds first such as "*/10 * * * * *", ` +
	`"@every 30s", @hourly/@daily/@weekly/@monthly/@yearly, optionally prefixed by "CRON_TZ=Europe/Berlin ", ` +
	`or a one-time "@at 2026-12-01T09:00:00Z"`

// Schedule is a parsed job schedule. It is immutable and safe for concurrent use.
type Schedule struct {
	spec  string
	every time.Duration  // > 0 for "@every": slots at whole multiples since the Unix epoch
	at    time.Time      // non-zero for "@at": the one slot
	cron  cron.Schedule  // otherwise
	loc   *time.Location // the cron time zone
	// dst is what a cron schedule does when its zone's clocks change (dst.go); the zero
	// value is the behaviour Parse describes.
	dst DST
	// parts, for a list of specs (New), are its schedules, whose union names the slots.
	parts []*Schedule
	// from and until, when set, bound the slots: none before from or after until (set.go).
	from, until time.Time
}

var (
	fiveFields = cron.NewParser(cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)
	sixFields  = cron.NewParser(cron.Second | cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)
)

// Parse parses spec: a 5-field cron expression (minute first), a 6-field one
// (seconds first), "@every <Go duration>" or a cron descriptor (@hourly,
// @daily, @weekly, @monthly, @yearly), with an optional "CRON_TZ=<IANA zone> "
// prefix (UTC by default). It refuses a schedule with no slot in the next
// five years, such as "0 0 30 2 *". "@at <RFC 3339 time>" has one slot, that
// instant (whole seconds); it parses even once it has passed, so a one-time job
// that ran stays valid.
//
// Cron slots follow robfig/cron in the schedule's zone: a wall-clock time
// skipped when clocks go forward has no slot that day; a wall-clock time
// repeated when clocks go back gets one slot, the first, unless the schedule
// fires that often anyway (an hourly job still runs every real hour). New
// takes a DST policy that does otherwise (dst.go), a list of specs and a window.
func Parse(spec string) (*Schedule, error) {
	fail := func(format string, args ...any) (*Schedule, error) {
		return nil, fmt.Errorf("schedule %q: %s", spec, fmt.Sprintf(format, args...))
	}
	s := &Schedule{spec: spec, loc: time.UTC}
	rest := strings.TrimSpace(spec)
	if zone, ok := strings.CutPrefix(rest, "CRON_TZ="); ok {
		zone, rest, _ = strings.Cut(zone, " ")
		rest = strings.TrimSpace(rest)
		// "Local" is each replica's own zone, so replicas could disagree on
		// the slots; "" is a typo, not a request for UTC.
		loc, err := time.LoadLocation(zone)
		if err != nil || zone == "" || zone == "Local" {
			return fail("unknown time zone %q (want an IANA zone such as \"UTC\" or \"America/New_York\")", zone)
		}
		s.loc = loc
	}

	if at, ok := strings.CutPrefix(rest, "@at"); ok {
		t, err := time.Parse(time.RFC3339, strings.TrimSpace(at))
		if err != nil || t.Nanosecond() != 0 {
			return fail(`@at needs an RFC 3339 time in whole seconds with its offset (e.g. "@at 2026-12-01T09:00:00Z")`)
		}
		s.at = t.UTC()
		return s, nil
	}
	if d, ok := strings.CutPrefix(rest, "@every"); ok {
		every, err := time.ParseDuration(strings.TrimSpace(d))
		if err != nil || every < time.Second || every%time.Second != 0 {
			return fail(`@every needs a whole number of seconds, at least 1s (e.g. "@every 30s", "@every 5m")`)
		}
		s.every = every
		return s, nil
	}

	var parser cron.Parser
	switch n := len(strings.Fields(rest)); {
	case strings.HasPrefix(rest, "@"):
		parser = fiveFields
	case n == 5:
		parser = fiveFields
	case n == 6:
		parser = sixFields
	default:
		return fail(`expected 5 or 6 fields (e.g. "0 2 * * *", "*/10 * * * * *") or "@every 30s"`)
	}
	// The zone is always given explicitly: robfig/cron would otherwise use
	// time.Local, which differs between machines.
	c, err := parser.Parse("CRON_TZ=" + s.loc.String() + " " + rest)
	if err != nil {
		return fail("%v (want %s)", err, validForms)
	}
	s.cron = c
	if s.Next(time.Now()).IsZero() {
		return fail("never fires within five years (want a date that exists, e.g. not February 30)")
	}
	return s, nil
}

// String returns the spec as given to Parse.
func (s *Schedule) String() string { return s.spec }

// Next returns the first slot strictly after t, or the zero time if there is
// none within five years (or within the window).
func (s *Schedule) Next(t time.Time) time.Time {
	if s.bounded() {
		return s.nextInWindow(t)
	}
	return s.nextAny(t)
}

// nextAny is Next regardless of the window.
func (s *Schedule) nextAny(t time.Time) time.Time {
	if s.parts != nil {
		return s.nextOfParts(t)
	}
	if s.Once() {
		if t.Before(s.at) {
			return s.at
		}
		return time.Time{}
	}
	if s.every > 0 {
		d := int64(s.every / time.Second)
		return time.Unix((floorDiv(t.Unix(), d)+1)*d, 0).UTC()
	}
	if !s.dst.isDefault() {
		return s.nextCronDST(t)
	}
	n := s.cron.Next(t)
	for !n.IsZero() && s.repeatsWallClock(n) {
		n = s.cron.Next(n)
	}
	if n.IsZero() {
		return time.Time{}
	}
	return n.UTC()
}

// repeatsWallClock reports whether slot n only exists because clocks went
// back: its wall-clock time was already a slot shift earlier, no slot lies
// between the two, and the schedule had no slot in the shift before that
// either (so "30 1 * * *" fires once on that day but "0 * * * *" keeps
// firing every real hour). gocron dedupes the same way; Next must do it
// itself because gocron's check compares wall clocks in its own zone.
func (s *Schedule) repeatsWallClock(n time.Time) bool {
	_, offNow := n.In(s.loc).Zone()
	// Transitions shift clocks by at most a few hours and are months apart.
	_, offBefore := n.Add(-3 * time.Hour).In(s.loc).Zone()
	if offBefore <= offNow {
		return false
	}
	shift := time.Duration(offBefore-offNow) * time.Second
	e := n.Add(-shift)
	if _, offE := e.In(s.loc).Zone(); offE != offBefore {
		return false // n is after the repeated hour
	}
	return s.cron.Next(e).Equal(n) && s.cron.Next(e.Add(-shift-time.Second)).Equal(e)
}

// Prev returns the latest slot at or before t, or the zero time if there is
// none within five years (or within the window).
func (s *Schedule) Prev(t time.Time) time.Time {
	if s.bounded() {
		return s.prevInWindow(t)
	}
	return s.prevAny(t)
}

// prevAny is Prev regardless of the window.
func (s *Schedule) prevAny(t time.Time) time.Time {
	t = t.Truncate(time.Second) // slots are whole seconds, so slot <= t iff slot <= this
	if s.parts != nil {
		return s.prevOfParts(t)
	}
	if s.Once() {
		if !s.at.After(t) {
			return s.at
		}
		return time.Time{}
	}
	if s.every > 0 {
		d := int64(s.every / time.Second)
		return time.Unix(floorDiv(t.Unix(), d)*d, 0).UTC()
	}
	// robfig/cron has no Prev. Find a window (lo, t] with a slot in it, then
	// bisect for the latest lo whose Next is still <= t: Next(lo) is then
	// the latest slot <= t. Next is monotonic, so this agrees with it exactly.
	for _, w := range prevWindows {
		lo := t.Add(-w)
		if n := s.nextAny(lo); n.IsZero() || n.After(t) {
			continue
		}
		hi := t // Next(hi) > t always
		for hi.Sub(lo) > time.Second {
			mid := lo.Add(hi.Sub(lo) / 2).Truncate(time.Second)
			if s.nextAny(mid).After(t) {
				hi = mid
			} else {
				lo = mid
			}
		}
		return s.nextAny(lo)
	}
	return time.Time{}
}

// Nearest returns the slot closest to t; on a tie, the earlier one. The
// leader uses it to name the slot a timer fired for, so a timer that fires a
// little early or late still claims the right slot.
func (s *Schedule) Nearest(t time.Time) time.Time {
	p := s.Prev(t)
	if p.IsZero() {
		return s.Next(t)
	}
	n := s.Next(p)
	if !n.IsZero() && n.Sub(t) < t.Sub(p) {
		return n
	}
	return p
}

// Period returns the gap between Prev(t) and the slot before it: the job's
// current period, used as its default catch-up window. When there is no
// earlier slot within the horizon it falls back to the gap after Prev(t).
// The window does not shorten it: a job's period, catch-up window and jitter
// bound stay those of its schedule, however few slots the window leaves.
func (s *Schedule) Period(t time.Time) time.Duration {
	if s.Once() {
		return 0 // a single slot has no period
	}
	if s.every > 0 {
		return s.every
	}
	p := s.prevAny(t)
	if p.IsZero() {
		p = s.nextAny(t)
		if p.IsZero() {
			return 0
		}
	}
	if before := s.prevAny(p.Add(-time.Second)); !before.IsZero() {
		return p.Sub(before)
	}
	if after := s.nextAny(p); !after.IsZero() {
		return after.Sub(p)
	}
	return 0
}

// Once reports whether the schedule is a one-time "@at" with a single slot.
func (s *Schedule) Once() bool { return !s.at.IsZero() }

// IsValid lets *Schedule serve as gocron v2's Cron (which also needs Next,
// whose signature already matches), so gocron fires exactly at our slots:
//
//	gocron.NewJob(gocron.CronJob(s.String(), true), task, gocron.WithCronImplementation(s))
//
// It always returns nil: Parse has validated the spec already, and gocron's
// own crontab and location must not override ours. Give the gocron scheduler
// gocron.WithLocation(time.UTC): gocron compares the wall clock of the last
// run (in its location) with the UTC slot Next returns to skip DST repeats,
// and in another zone that comparison could match by accident.
func (s *Schedule) IsValid(string, *time.Location, time.Time) error { return nil }

// floorDiv divides rounding towards minus infinity, so slots before the
// epoch are aligned the same way as those after it.
func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && (a < 0) != (b < 0) {
		q--
	}
	return q
}
