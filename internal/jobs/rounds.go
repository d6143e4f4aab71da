package jobs

import (
	"fmt"
	"time"

	// The rounds jobs compute local dates and drop instants with Go's zone database. The
	// embedded copy is the fallback for hosts (scratch or distroless images) that ship none,
	// where every group would otherwise be skipped as bad_timezone.
	_ "time/tzdata"
)

// The shared machinery of rounds-create, rounds-open and rounds-close.

const (
	// roundsBatchSize bounds each batch: the rows read at once and the per-group advisory
	// locks one transaction holds (they share PostgreSQL's lock table, sized
	// max_locks_per_transaction × max_connections, with every other job).
	roundsBatchSize = 500

	// roundDuration is how long a round stays open.
	roundDuration = 24 * time.Hour

	// maxUTCOffset bounds how far ahead of UTC any zone's clock runs (+14:00 today, up to
	// about +15:13 in old local-mean-time rules), so a local wall time is never reached
	// earlier than that far before the same reading in UTC.
	maxUTCOffset = 16 * time.Hour

	detailBadTimezone = "bad_timezone"
	detailNoPrompt    = "no_prompt"
	detailNoSettings  = "no_settings"
)

// zoneCache loads each IANA zone once per run.
type zoneCache map[string]zoneEntry

type zoneEntry struct {
	loc *time.Location
	err error
}

// load returns the named zone. It refuses the names Go would silently map to a zone the
// group did not ask for ("" is UTC, "Local" is this replica's zone).
func (c zoneCache) load(name string) (*time.Location, error) {
	if e, ok := c[name]; ok {
		return e.loc, e.err
	}
	var e zoneEntry
	if name == "" || name == "Local" {
		e.err = fmt.Errorf("time zone %q is not an IANA zone name", name)
	} else {
		e.loc, e.err = time.LoadLocation(name)
	}
	c[name] = e
	return e.loc, e.err
}

// localDate is the calendar date of now on loc's clocks, as PostgreSQL date values are
// scanned (midnight UTC).
func localDate(now time.Time, loc *time.Location) time.Time {
	y, m, d := now.In(loc).Date()
	return time.Date(y, m, d, 0, 0, 0, 0, time.UTC)
}

// dropInstant returns the first instant at which loc's clocks read date + clock or later:
// the instant a round of that local date and drop time opens.
//
// This is the rule PostgreSQL's (date + time) AT TIME ZONE tz does not follow: in a
// spring-forward gap it shifts the reading forward by the gap's length (02:30 on a
// 02:00 → 03:00 day gives 03:30, not 03:00), and a fall-back reading that occurs twice
// gives the second occurrence, not the first. Here a reading inside a gap gives the first
// instant after the gap (03:00), and a reading that occurs twice gives the first one.
//
// It walks loc's zone periods (constant-offset spans between transitions) from an instant
// whose clock certainly reads earlier; the first period whose clock reaches the reading
// holds the answer: the instant its clock shows it, or the period's start when the reading
// fell into the gap just before it.
func dropInstant(date time.Time, clock time.Duration, loc *time.Location) time.Time {
	y, m, d := date.Date()
	// The reading, as if it were a UTC reading; a zone at offset o shows it at wall - o.
	wall := time.Date(y, m, d, 0, 0, 0, 0, time.UTC).Add(clock)
	t := wall.Add(-maxUTCOffset)
	for {
		lt := t.In(loc)
		_, offset := lt.Zone()
		start, end := lt.ZoneBounds()
		at := wall.Add(-time.Duration(offset) * time.Second)
		if end.IsZero() || at.Before(end) {
			if !start.IsZero() && at.Before(start) {
				return start
			}
			return at
		}
		t = end
	}
}
