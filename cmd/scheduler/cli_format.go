package main

import (
	"fmt"
	"strings"
	"time"
)

// Formatting shared by the client commands' tables.

// when shows a time in UTC with how far it is from now: "2026-01-31 02:00:00Z (in 3h5m)".
func (x *cli) when(t *time.Time) string {
	if t == nil {
		return "-"
	}
	d := t.Sub(x.now()).Round(time.Second)
	rel := "now"
	switch {
	case d >= time.Second:
		rel = "in " + shortDuration(d)
	case d <= -time.Second:
		rel = shortDuration(-d) + " ago"
	}
	return t.UTC().Format("2006-01-02 15:04:05Z") + " (" + rel + ")"
}

func shortDuration(d time.Duration) string {
	switch {
	case d >= 48*time.Hour:
		return fmt.Sprintf("%dd", d/(24*time.Hour))
	case d >= time.Hour:
		return strings.TrimSuffix(d.Truncate(time.Minute).String(), "0s")
	default:
		return d.String()
	}
}

func durationText(ms *int64) string {
	if ms == nil {
		return "-"
	}
	return (time.Duration(*ms) * time.Millisecond).String()
}

func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}

func deref(s *string) string {
	if s == nil {
		return "-"
	}
	return *s
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

func orNone(args string) string {
	if args == "" {
		return "no arguments"
	}
	return args
}

func upperFirst(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}
