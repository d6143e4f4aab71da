package schedule

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// A runtime job's schedule is more than one spec: a list of them, whose union names the
// slots, a DST policy (dst.go), and a window outside which it names none. They are all
// kept inside Schedule, so that everything that walks slots (the timers, catch-up, the slot
// audit, the failover repair, the API's next runs and slot list) follows them without
// knowing they exist.

// Options are what a definition adds to its schedule specs.
type Options struct {
	DST DST
	// From and Until bound the slots when set: none before From, none after Until.
	From, Until time.Time
}

// SpecError is a problem of one spec of a list, at Index.
type SpecError struct {
	Index int
	Err   error
}

func (e *SpecError) Error() string { return e.Err.Error() }
func (e *SpecError) Unwrap() error { return e.Err }

// New parses specs, each one of Parse's forms, as one schedule: the union of their slots,
// an instant named twice (by two specs, or one spec twice) being one slot. Every spec is in
// one time zone, so that the job's wall-clock times, its DST policy and its warnings are
// about one clock. One spec without options is exactly what Parse returns. Equal inputs
// share one Schedule (intern.go).
func New(specs []string, o Options) (*Schedule, error) {
	if len(specs) == 0 {
		return nil, errors.New("no schedule: give a cron expression, or a list of them")
	}
	key := keyOf(specs, o)
	if s := sharedSchedule(key); s != nil {
		return s, nil
	}
	parts := make([]*Schedule, len(specs))
	for i, spec := range specs {
		p, err := Parse(spec)
		if err != nil {
			return nil, &SpecError{Index: i, Err: err}
		}
		if i > 0 && p.loc.String() != parts[0].loc.String() {
			return nil, &SpecError{Index: i, Err: fmt.Errorf("schedule %q: is in %s, and %q in %s: the specs of a list share one time zone (set time_zone, not CRON_TZ= per spec)",
				spec, p.loc, specs[0], parts[0].loc)}
		}
		p.dst = o.DST
		parts[i] = p
	}
	s := parts[0]
	if len(parts) > 1 {
		s = &Schedule{spec: strings.Join(specs, "; "), loc: parts[0].loc, dst: o.DST, parts: parts}
	}
	s.from, s.until = o.From, o.Until
	if !s.from.IsZero() && !s.until.IsZero() && s.until.Before(s.from) {
		return nil, fmt.Errorf("the window ends before it starts (%s is before %s)", rfc3339(s.until), rfc3339(s.from))
	}
	switch {
	case !s.from.IsZero() && s.Next(s.from.Add(-time.Second)).IsZero():
		if s.until.IsZero() {
			return nil, fmt.Errorf("the schedule names no slot from %s on", rfc3339(s.from))
		}
		return nil, fmt.Errorf("the schedule names no slot from %s to %s", rfc3339(s.from), rfc3339(s.until))
	case s.from.IsZero() && !s.until.IsZero() && s.Prev(s.until).IsZero():
		// A window that ended long ago still parses (a stored definition is loaded whatever
		// the date); it needs a slot before its end all the same.
		return nil, fmt.Errorf("the schedule names no slot up to %s", rfc3339(s.until))
	}
	return share(key, s), nil
}

// Specs are the schedule's specs: one, or those of its list, as given.
func (s *Schedule) Specs() []string {
	if s.parts == nil {
		return []string{s.spec}
	}
	specs := make([]string, len(s.parts))
	for i, p := range s.parts {
		specs[i] = p.spec
	}
	return specs
}

// Key names what decides the slots: the specs, the DST policy and the window. Jobs whose
// schedules have one key fire at the same instants and may share a timer; for a schedule
// Parse returns, it is String().
func (s *Schedule) Key() string {
	k := s.spec
	if !s.dst.isDefault() {
		k += " dst=" + s.dst.gap() + "/" + s.dst.repeat()
	}
	if !s.from.IsZero() {
		k += " from=" + rfc3339(s.from)
	}
	if !s.until.IsZero() {
		k += " until=" + rfc3339(s.until)
	}
	return k
}

func (s *Schedule) bounded() bool { return !s.from.IsZero() || !s.until.IsZero() }

// nextInWindow is Next within the window. Before from, the search starts just before it, so
// that a slot at from itself counts.
func (s *Schedule) nextInWindow(t time.Time) time.Time {
	if !s.from.IsZero() && t.Before(s.from) {
		t = s.from.Add(-time.Nanosecond)
	}
	n := s.nextAny(t)
	if !s.until.IsZero() && n.After(s.until) {
		return time.Time{}
	}
	return n
}

// prevInWindow is Prev within the window.
func (s *Schedule) prevInWindow(t time.Time) time.Time {
	if !s.until.IsZero() && t.After(s.until) {
		t = s.until
	}
	p := s.prevAny(t)
	if !s.from.IsZero() && p.Before(s.from) {
		return time.Time{}
	}
	return p
}

// nextOfParts is the earliest of the parts' next slots.
func (s *Schedule) nextOfParts(t time.Time) time.Time {
	var best time.Time
	for _, p := range s.parts {
		if n := p.nextAny(t); !n.IsZero() && (best.IsZero() || n.Before(best)) {
			best = n
		}
	}
	return best
}

// prevOfParts is the latest of the parts' previous slots.
func (s *Schedule) prevOfParts(t time.Time) time.Time {
	var best time.Time
	for _, p := range s.parts {
		if n := p.prevAny(t); n.After(best) {
			best = n
		}
	}
	return best
}

// textOfParts says each distinct part in words, joined by "and".
func (s *Schedule) textOfParts() string {
	var texts []string
	seen := map[string]bool{}
	for _, p := range s.parts {
		if t := p.Text(); !seen[t] {
			seen[t] = true
			texts = append(texts, t)
		}
	}
	return strings.Join(texts, " and ")
}

// withDST is the schedule under another DST policy, for the warnings' comparisons.
func (s *Schedule) withDST(d DST) *Schedule {
	c := *s
	c.dst = d
	if s.parts != nil {
		c.parts = make([]*Schedule, len(s.parts))
		for i, p := range s.parts {
			pc := *p
			pc.dst = d
			c.parts[i] = &pc
		}
	}
	return &c
}

func rfc3339(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }
