package schedule_test

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schedulerhq/scheduler/internal/schedule"
)

// TestCloserThanAgreesWithWalkingEverySlot: on random schedule sets (crons, @every, DST
// zones and policies, windows), CloserThan finds a pair closer than the floor exactly when
// walking every slot of the horizon with Next finds one, and its pair is two real slots.
func TestCloserThanAgreesWithWalkingEverySlot(t *testing.T) {
	rng := rand.New(rand.NewPCG(42, 42))
	zones := []string{"UTC", "Europe/Paris", "America/New_York", "Australia/Lord_Howe"}
	from := time.Date(2026, 11, 25, 7, 13, 0, 0, time.UTC)
	pick := func(lo, hi, n int) string {
		s := ""
		for i := range n {
			if i > 0 {
				s += ","
			}
			s += fmt.Sprint(lo + rng.IntN(hi-lo))
		}
		return s
	}
	hours := func() string { // the hours clocks change in, often
		if rng.IntN(2) == 0 {
			return pick(1, 4, 1+rng.IntN(2))
		}
		return pick(0, 24, 1+rng.IntN(4))
	}
	for i := range 400 {
		zone := zones[rng.IntN(len(zones))]
		var specs []string
		for range 1 + rng.IntN(3) {
			switch rng.IntN(6) {
			case 0:
				specs = append(specs, fmt.Sprintf("@every %dm", 20+rng.IntN(200)))
			case 4:
				specs = append(specs, fmt.Sprintf("%s %s %s * * *", pick(0, 60, 1+rng.IntN(3)), pick(0, 60, 1+rng.IntN(2)), hours()))
			case 5:
				specs = append(specs, fmt.Sprintf("@every %ds", 1000+rng.IntN(9000)))
			case 1:
				specs = append(specs, fmt.Sprintf("%s %s * * %s", pick(0, 60, 1+rng.IntN(2)), hours(), pick(0, 7, 1+rng.IntN(3))))
			default:
				specs = append(specs, fmt.Sprintf("%s %s * * *", pick(0, 60, 1+rng.IntN(2)), hours()))
			}
		}
		if zone != "UTC" {
			for j := range specs {
				specs[j] = "CRON_TZ=" + zone + " " + specs[j]
			}
		}
		o := schedule.Options{DST: schedule.DST{
			Gap:    []string{schedule.GapSkip, schedule.GapShift}[rng.IntN(2)],
			Repeat: []string{schedule.RepeatFirst, schedule.RepeatLast, schedule.RepeatBoth}[rng.IntN(3)]}}
		if rng.IntN(4) == 0 {
			o.From = from.Add(time.Duration(rng.IntN(100)) * 24 * time.Hour)
			o.Until = o.From.Add(time.Duration(1+rng.IntN(200)) * 24 * time.Hour)
		}
		floor := time.Duration(10+rng.IntN(7000)) * time.Second
		s, err := schedule.New(specs, o)
		if err != nil && !o.From.IsZero() {
			continue // a short window without a slot
		}
		require.NoError(t, err)
		name := fmt.Sprintf("%d %q %+v floor %s", i, specs, o.DST, floor)

		walked := false
		start := from
		if !o.From.IsZero() {
			start = o.From
		}
		end := start.Add(schedule.GapHorizon)
		if !o.Until.IsZero() && o.Until.Before(end) {
			end = o.Until
		}
		for cur := s.Next(start.Add(-time.Second)); !cur.IsZero() && !cur.After(end); {
			next := s.Next(cur)
			if next.IsZero() || next.After(end) {
				break
			}
			if next.Sub(cur) < floor {
				walked = true
				break
			}
			cur = next
		}
		a, b, found := s.CloserThan(from, floor)
		require.Equal(t, walked, found, "%s: found %s %s", name, a, b)
		if found {
			assert.Less(t, b.Sub(a), floor, name)
			assert.Equal(t, a, s.Prev(a), "%s: %s is a slot", name, a)
			assert.Equal(t, b, s.Prev(b), "%s: %s is a slot", name, b)
		}
	}
}

// Two @every specs come gcd(N, M) apart, and CloserThan names the first such pair from
// the start on, both slots real.
func TestCloserThanFindsTheGCDOfTwoEverys(t *testing.T) {
	s, err := schedule.New([]string{"@every 1h", "@every 3601s"}, schedule.Options{})
	require.NoError(t, err)
	from := time.Date(2026, 11, 25, 0, 0, 0, 0, time.UTC)
	a, b, ok := s.CloserThan(from, time.Hour)
	require.True(t, ok)
	assert.Equal(t, time.Second, b.Sub(a))
	assert.False(t, a.Before(from))
	assert.Equal(t, b, s.Next(a), "consecutive slots")
	assert.True(t, a.Unix()%3600 == 0 && b.Unix()%3601 == 0 || a.Unix()%3601 == 0 && b.Unix()%3600 == 0, "%s %s", a, b)

	nested, err := schedule.New([]string{"@every 2h", "@every 6h"}, schedule.Options{})
	require.NoError(t, err)
	_, _, ok = nested.CloserThan(from, 2*time.Hour)
	assert.False(t, ok, "every 6h slot is a 2h slot")
}
