package schedule

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Location returns the zone the schedule's wall-clock times are in (UTC unless CRON_TZ set
// one; @every slots do not depend on it).
func (s *Schedule) Location() *time.Location { return s.loc }

// descriptors are robfig/cron's shorthands, spelled out so Text describes them like the rest.
var descriptors = map[string]string{
	"@yearly": "0 0 1 1 *", "@annually": "0 0 1 1 *", "@monthly": "0 0 1 * *",
	"@weekly": "0 0 * * 0", "@daily": "0 0 * * *", "@midnight": "0 0 * * *", "@hourly": "0 * * * *",
}

var weekdays = []string{"Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"}

// Text describes the schedule in plain words for people ("every day at 02:00 UTC", "every 5
// minutes"). Forms it has no words for come back as the expression itself, prefixed with
// "cron", so an operator is never shown a wrong paraphrase.
func (s *Schedule) Text() string {
	if s.parts != nil {
		return s.textOfParts()
	}
	rest := strings.TrimSpace(s.spec)
	if strings.HasPrefix(rest, "CRON_TZ=") {
		_, rest, _ = strings.Cut(rest, " ")
		rest = strings.TrimSpace(rest)
	}
	if s.Once() {
		return "once, at " + s.at.Format("2006-01-02 15:04:05") + " UTC"
	}
	if s.every > 0 {
		return "every " + durationWords(s.every)
	}
	if d, ok := descriptors[rest]; ok {
		rest = d
	}
	f := strings.Fields(rest)
	if len(f) == 6 {
		if step, ok := everyStep(f[0]); ok && allStars(f[1:]) {
			return "every " + plural(step, "second")
		}
		if f[0] != "0" {
			return "cron " + rest
		}
		f = f[1:]
	}
	if text, ok := cronText(f, s.loc.String()); ok {
		return text
	}
	return "cron " + rest
}

func cronText(f []string, zone string) (string, bool) {
	if len(f) != 5 {
		return "", false
	}
	minute, hour, dom, month, dow := f[0], f[1], f[2], f[3], f[4]
	if month != "*" {
		// Only the yearly form: one day of one month.
		m, err1 := strconv.Atoi(month)
		d, err2 := strconv.Atoi(dom)
		if err1 != nil || err2 != nil || m < 1 || m > 12 || d < 1 || dow != "*" {
			return "", false
		}
		daily, ok := cronText([]string{minute, hour, "*", "*", "*"}, zone)
		if !ok || !strings.HasPrefix(daily, "every day at ") {
			return "", false
		}
		return fmt.Sprintf("every year on %d %s at %s", d, time.Month(m), strings.TrimPrefix(daily, "every day at ")), true
	}
	if hour == "*" && dom == "*" && dow == "*" {
		if minute == "*" {
			return "every minute", true
		}
		if step, ok := everyStep(minute); ok {
			return "every " + plural(step, "minute"), true
		}
		mins, ok := numbers(minute, 59)
		if !ok {
			return "", false
		}
		if len(mins) == 1 && mins[0] == 0 {
			return "every hour, on the hour", true
		}
		return "every hour at minute" + pluralS(len(mins)) + " " + joinWords(itoas(mins)), true
	}
	mins, ok1 := numbers(minute, 59)
	hours, ok2 := numbers(hour, 23)
	if !ok1 || !ok2 || len(mins)*len(hours) > 6 {
		return "", false
	}
	var times []string
	for _, h := range hours {
		for _, m := range mins {
			times = append(times, fmt.Sprintf("%02d:%02d", h, m))
		}
	}
	at := " at " + joinWords(times) + " " + zone
	switch {
	case dom == "*" && dow == "*":
		return "every day" + at, true
	case dom == "*":
		days, ok := weekdayWords(dow)
		if !ok {
			return "", false
		}
		return "every " + days + at, true
	case dow == "*":
		ds, ok := numbers(dom, 31)
		if !ok || slices.Contains(ds, 0) {
			return "", false
		}
		return "on day" + pluralS(len(ds)) + " " + joinWords(itoas(ds)) + " of every month" + at, true
	}
	return "", false
}

// weekdayWords reads a day-of-week field: "1", "1-5", "1,3,5" (0 and 7 are Sunday).
func weekdayWords(field string) (string, bool) {
	if a, b, ok := strings.Cut(field, "-"); ok {
		x, err1 := strconv.Atoi(a)
		y, err2 := strconv.Atoi(b)
		if err1 != nil || err2 != nil || x < 0 || y > 7 || x >= y {
			return "", false
		}
		return weekdays[x] + " to " + weekdays[y], true
	}
	ds, ok := numbers(field, 7)
	if !ok {
		return "", false
	}
	var names []string
	for _, d := range ds {
		names = append(names, weekdays[d])
	}
	return joinWords(names), true
}

// everyStep reads "*/N".
func everyStep(field string) (int, bool) {
	v, ok := strings.CutPrefix(field, "*/")
	if !ok {
		return 0, false
	}
	n, err := strconv.Atoi(v)
	return n, err == nil && n > 0
}

// numbers reads a plain list of values ("0", "2,14"), each at most hi.
func numbers(field string, hi int) ([]int, bool) {
	var out []int
	for _, p := range strings.Split(field, ",") {
		n, err := strconv.Atoi(p)
		if err != nil || n < 0 || n > hi {
			return nil, false
		}
		out = append(out, n)
	}
	return out, true
}

func allStars(f []string) bool {
	for _, v := range f {
		if v != "*" {
			return false
		}
	}
	return true
}

func itoas(ns []int) []string {
	out := make([]string, len(ns))
	for i, n := range ns {
		out[i] = strconv.Itoa(n)
	}
	return out
}

func joinWords(w []string) string {
	if len(w) <= 1 {
		return strings.Join(w, "")
	}
	return strings.Join(w[:len(w)-1], ", ") + " and " + w[len(w)-1]
}

func pluralS(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

func plural(n int, unit string) string {
	if n == 1 {
		return unit
	}
	return strconv.Itoa(n) + " " + unit + "s"
}

// durationWords says an @every period in its largest whole unit.
func durationWords(d time.Duration) string {
	switch {
	case d%time.Hour == 0:
		return plural(int(d/time.Hour), "hour")
	case d%time.Minute == 0:
		return plural(int(d/time.Minute), "minute")
	default:
		return plural(int(d/time.Second), "second")
	}
}
