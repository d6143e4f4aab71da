package schedule

import (
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Definitions that ask for the same schedule share one; any difference in what decides the
// slots (a spec, the list, the DST policy, the window) makes another.
func TestEqualInputsShareOneSchedule(t *testing.T) {
	must := func(specs []string, o Options) *Schedule {
		t.Helper()
		s, err := New(specs, o)
		require.NoError(t, err)
		return s
	}
	from := time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC)
	base := must([]string{"*/7 * * * *"}, Options{})
	assert.Same(t, base, must([]string{"*/7 * * * *"}, Options{}))

	for name, other := range map[string]*Schedule{
		"another spec":       must([]string{"*/8 * * * *"}, Options{}),
		"a list":             must([]string{"*/7 * * * *", "0 9 * * *"}, Options{}),
		"a DST policy":       must([]string{"*/7 * * * *"}, Options{DST: DST{Gap: GapShift}}),
		"a window":           must([]string{"*/7 * * * *"}, Options{From: from}),
		"a window's end too": must([]string{"*/7 * * * *"}, Options{From: from, Until: from.Add(time.Hour)}),
	} {
		assert.NotSame(t, base, other, name)
	}
	// Two lists whose specs joined read alike are not one input.
	assert.NotEqual(t, keyOf([]string{"ab", "c"}, Options{}), keyOf([]string{"a", "bc"}, Options{}))
}

// A schedule no definition uses any more is collected, and its entry goes with it: the
// table does not keep every schedule ever parsed.
func TestUnusedScheduleLeavesTheTable(t *testing.T) {
	specs := []string{"17 3 * * 2"}
	key := keyOf(specs, Options{})
	s, err := New(specs, Options{})
	require.NoError(t, err)
	_, ok := interned.Load(key)
	require.True(t, ok, "the schedule is in the table while used")
	runtime.KeepAlive(s)
	s = nil

	deadline := time.Now().Add(10 * time.Second)
	for {
		runtime.GC() // the cleanup runs after the collection that freed the schedule
		if _, ok := interned.Load(key); !ok {
			break
		}
		require.True(t, time.Now().Before(deadline), "the unused schedule's entry is still in the table")
		time.Sleep(10 * time.Millisecond)
	}
	again, err := New(specs, Options{})
	require.NoError(t, err)
	assert.Equal(t, specs, again.Specs(), "a schedule parsed again after its entry left")
}

// Many definitions loaded at once, on every replica's goroutines, get one schedule.
func TestConcurrentLoadsShareOneSchedule(t *testing.T) {
	specs := []string{"*/11 * * * *"}
	got := make([]*Schedule, 64)
	var wg sync.WaitGroup
	for i := range got {
		wg.Go(func() {
			s, err := New(specs, Options{})
			assert.NoError(t, err)
			got[i] = s
		})
	}
	wg.Wait()
	for _, s := range got {
		assert.Same(t, got[0], s)
	}
}
