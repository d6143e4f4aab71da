package runtimejob

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/schedulerhq/scheduler/internal/namespace"
	"github.com/schedulerhq/scheduler/internal/schedule"
)

// The check of what decides a job's slots: its schedule (one spec or a list), its time
// zone, its DST policy, its window (start_at, end_at) and its max_runs.

const (
	// maxSchedules bounds a list of specs: each costs a look-up per slot computed.
	maxSchedules = 32
	// maxMaxRuns bounds max_runs: a job that should run more often needs none.
	maxMaxRuns = 1_000_000
	// scheduleWant says what a schedule looks like, for the message of a missing one.
	scheduleWant = `required: a cron expression such as "0 2 * * *", "@every 5m" or "@at 2026-12-01T09:00:00Z", or a list of them`
)

// schedule parses the schedule with its time zone, which may come from time_zone or a
// CRON_TZ= prefix, not both, its DST policy and its window. A list's specs are trimmed
// and a spec written twice is kept once, so a list reads back in its normal form; a list
// of one is written as its spec.
func (c *checker) schedule(j *Checked) {
	d := &j.Def
	list := len(d.Schedule) > 1
	field := func(i int) string {
		if list {
			return fmt.Sprintf("schedule[%d]", i)
		}
		return "schedule"
	}
	opts := c.calendar(j)
	switch {
	case len(d.Schedule) == 0 && len(d.After) > 0:
		j.Schedule, j.FollowsOnly = noSlots, true
		return
	case len(d.Schedule) == 0:
		c.fail("schedule", scheduleWant)
		return
	case len(d.Schedule) > maxSchedules:
		c.fail("schedule", "%d specs; at most %d", len(d.Schedule), maxSchedules)
		return
	}
	var specs []string
	valid, seen := true, map[string]bool{}
	for i, raw := range d.Schedule {
		spec := strings.TrimSpace(raw)
		switch {
		case spec == "":
			c.fail(field(i), scheduleWant)
			valid = false
		case len(spec) > maxSchedule:
			c.fail(field(i), "at most %d characters", maxSchedule)
			valid = false
		case !seen[spec]:
			seen[spec] = true
			specs = append(specs, spec)
		}
	}
	if !valid {
		return
	}
	if list {
		// One spec stays as written, as before lists: its normal form must not change.
		d.Schedule = specs
	}
	full, ok := c.zoned(d.TimeZone, specs)
	if !ok {
		return
	}
	s, err := schedule.New(full, opts)
	var se *schedule.SpecError
	switch {
	case errors.As(err, &se):
		c.fail(field(se.Index), "%s", strings.TrimPrefix(se.Error(), fmt.Sprintf("schedule %q: ", full[se.Index])))
		return
	case err != nil:
		// Only the window can be wrong once every spec parsed.
		c.fail(windowField(d), "%s", err)
		return
	}
	if !c.env.Now.IsZero() && s.Next(c.env.Now).IsZero() {
		if s.Once() {
			c.fail("schedule", "%s has passed: a one-time job needs a time in the future", specs[0])
		} else {
			c.fail("schedule", "names no slot after now: a job needs a time in the future")
		}
		return
	}
	j.Schedule = s
}

// zoned prefixes each spec with time_zone, if set: the zone is set either there or as a
// spec's CRON_TZ= prefix, not both.
func (c *checker) zoned(zone string, specs []string) ([]string, bool) {
	if zone == "" {
		return specs, true
	}
	for _, spec := range specs {
		if strings.HasPrefix(spec, "CRON_TZ=") {
			c.fail("time_zone", "set the zone either in time_zone or as the schedule's CRON_TZ= prefix, not both")
			return nil, false
		}
	}
	if loc, err := time.LoadLocation(zone); err != nil || zone == "Local" {
		c.fail("time_zone", "%q is not an IANA time zone (e.g. Europe/Paris, America/New_York, UTC)", zone)
		return nil, false
	} else if loc == time.UTC && zone != "UTC" {
		c.fail("time_zone", `%q: write "UTC"`, zone)
		return nil, false
	}
	full := make([]string, len(specs))
	for i, spec := range specs {
		full[i] = "CRON_TZ=" + zone + " " + spec
	}
	return full, true
}

// calendar checks dst, start_at, end_at and max_runs, fills in the DST policy's half left
// out, and returns the schedule's options. A field that is wrong is left out of them, so
// the schedule's own check still runs.
func (c *checker) calendar(j *Checked) schedule.Options {
	d := &j.Def
	var o schedule.Options
	if d.DST != nil {
		dst := *d.DST
		switch dst.Gap {
		case "":
			dst.Gap = schedule.GapSkip
		case schedule.GapSkip, schedule.GapShift:
		default:
			c.fail("dst.gap", "%q is not a gap policy: want %q or %q", dst.Gap, schedule.GapSkip, schedule.GapShift)
		}
		switch dst.Repeat {
		case "":
			dst.Repeat = schedule.RepeatFirst
		case schedule.RepeatFirst, schedule.RepeatLast, schedule.RepeatBoth:
		default:
			c.fail("dst.repeat", "%q is not a repeat policy: want %q, %q or %q", dst.Repeat, schedule.RepeatFirst, schedule.RepeatLast, schedule.RepeatBoth)
		}
		d.DST = &dst
		o.DST = schedule.DST{Gap: dst.Gap, Repeat: dst.Repeat}
	}
	d.StartAt, o.From = c.instant("start_at", d.StartAt)
	d.EndAt, o.Until = c.instant("end_at", d.EndAt)
	switch {
	case !o.From.IsZero() && !o.Until.IsZero() && o.Until.Before(o.From):
		c.fail("end_at", "%s is before start_at (%s)", d.EndAt, d.StartAt)
		o.Until = time.Time{}
	case !o.Until.IsZero() && !c.env.Now.IsZero() && o.Until.Before(c.env.Now):
		c.fail("end_at", "%s has passed: a job's window must end in the future", d.EndAt)
		o.Until = time.Time{}
	}
	if d.MaxRuns < 0 || d.MaxRuns > maxMaxRuns {
		c.fail("max_runs", "%d is out of range: want 1 to %d, or leave it out for no limit", d.MaxRuns, maxMaxRuns)
	}
	return o
}

// instant parses an optional RFC 3339 time, written back the normal way (its offset kept).
func (c *checker) instant(field, v string) (string, time.Time) {
	if v == "" {
		return "", time.Time{}
	}
	t, err := time.Parse(time.RFC3339Nano, v)
	if err != nil {
		c.fail(field, "%q is not an RFC 3339 time with its offset (e.g. 2027-01-01T00:00:00Z or 2027-01-01T09:00:00+01:00)", v)
		return v, time.Time{}
	}
	return t.Format(time.RFC3339Nano), t
}

// windowField is the field a window without a slot is reported on.
func windowField(d *Definition) string {
	if d.EndAt != "" {
		return "end_at"
	}
	return "start_at"
}

// minInterval holds the namespace's min_interval for the whole schedule set: no two slots
// closer, the DST policy and the window included. The job's jitter is one fixed offset
// for all its slots (Checked.Offset), so it moves every call alike and narrows no gap.
func (c *checker) minInterval(j *Checked) {
	if c.env.MinInterval <= 0 || j.Schedule == nil {
		return
	}
	now := c.env.Now
	if now.IsZero() {
		now = time.Now()
	}
	a, b, ok := j.Schedule.CloserThan(now, c.env.MinInterval)
	if !ok {
		return
	}
	c.fail("schedule", "slots %s and %s are %s apart, and namespace %s allows no less than %s between slots (its min_interval); choose schedules whose slots are further apart, or ask an admin to lower the quota",
		a.Format(time.RFC3339), b.Format(time.RFC3339), short(b.Sub(a)), namespace.Of(j.Def.Key()), short(c.env.MinInterval))
}
