package engine

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schedulerhq/scheduler/internal/schedule"
)

func timerGroupOn(t *testing.T, spec string, lead time.Duration, last time.Time) *timerGroup {
	t.Helper()
	sched, err := schedule.Parse(spec)
	require.NoError(t, err)
	return &timerGroup{sched: sched, lead: lead, members: map[string]*entry{}, last: last}
}

// A timer's firing names no slot; the group works out which slots it is for. A firing more
// than half a period late must claim its own slot, not the next one: taking the slot
// nearest to the firing left the late one without a row.
func TestTimerFiringClaimsItsOwnSlotWhenLate(t *testing.T) {
	t.Parallel()
	at := func(s string) time.Time {
		v, err := time.Parse(time.RFC3339Nano, "2026-11-29T19:28:"+s+"Z")
		require.NoError(t, err)
		return v
	}
	g := timerGroupOn(t, "@every 1s", 0, at("34"))

	assert.Equal(t, []time.Time{at("35")}, g.due(at("35.866")), "late by 866 ms: slot 35, not the nearest (36)")
	assert.Equal(t, []time.Time{at("36")}, g.due(at("35.999")), "a moment early: the coming slot")
	assert.Empty(t, g.due(at("36.002")), "slot 36 was fired already")
	assert.Equal(t, []time.Time{at("37"), at("38"), at("39")}, g.due(at("39.4")), "after a stall: every slot passed, oldest first")

	// A stall of more than maxSlotsAFiring periods: the rest are the next firings'.
	g = timerGroupOn(t, "@every 1s", 0, at("00"))
	first := g.due(at("00").Add(150 * time.Second))
	require.Len(t, first, maxSlotsAFiring)
	assert.Equal(t, at("01"), first[0])
	next := g.due(at("00").Add(150*time.Second + 10*time.Millisecond))
	require.Len(t, next, 150-maxSlotsAFiring)
	assert.Equal(t, first[len(first)-1].Add(time.Second), next[0])
}

// A schedule that claims ahead fires lead before its slots: late or early is measured
// against the slot minus the lead.
func TestTimerFiringAheadClaimsItsOwnSlot(t *testing.T) {
	t.Parallel()
	at := func(s string) time.Time {
		v, err := time.Parse(time.RFC3339, s)
		require.NoError(t, err)
		return v
	}
	g := timerGroupOn(t, "* * * * *", 2*time.Second, at("2026-11-29T19:28:00Z"))
	assert.Equal(t, []time.Time{at("2026-11-29T19:29:00Z")}, g.due(at("2026-11-29T19:28:57.999Z")), "a moment before slot - lead")
	assert.Equal(t, []time.Time{at("2026-11-29T19:30:00Z")}, g.due(at("2026-11-29T19:29:59Z")), "late by 1 s: its slot")
	assert.Empty(t, g.due(at("2026-11-29T19:30:00Z")))
}

// A group made with no earlier slot (a window that has not begun) fires for the nearest slot.
func TestTimerFiringWithNoSlotBeforeTakesTheNearest(t *testing.T) {
	t.Parallel()
	g := timerGroupOn(t, "@every 1m", 0, time.Time{})
	now := time.Date(2026, 11, 29, 19, 28, 59, 900_000_000, time.UTC)
	assert.Equal(t, []time.Time{time.Date(2026, 11, 29, 19, 29, 0, 0, time.UTC)}, g.due(now))
}
