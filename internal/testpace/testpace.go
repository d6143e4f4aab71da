// Package testpace gives a test's waits deadlines that follow the machine's pace. A wait
// that is written for an idle machine ("the page shows the row within 10 s") fails on a
// machine that other work slows down, although nothing is wrong but the time; a longer
// constant only moves the guess. Here a wait names its deadline on an idle machine, and
// the deadline stretches by how much slower the machine runs while the test waits.
//
// The pace is measured, not guessed: the kernel's count of tasks that want a core (the
// 1-minute load average, /proc/loadavg) over the machine's cores. On an idle
// machine it is below 1 and the deadline is the one written; with a second `make test`
// on the same two cores it is about 2 to 4, and each task gets about that share of a
// core, so its waits take about that many times longer. It is read again while a wait
// waits, so load that begins during the wait lengthens it. TEST_PACE, when set, multiplies
// it: a machine slower than the load shows, such as one under an emulator.
//
// The factor is capped (MaxPace), so a wait for something that never comes still ends,
// and says so, in minutes. A longer deadline changes nothing on success: a wait ends when
// its event comes.
package testpace

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"
)

// MaxPace bounds the factor: 16 times a 10 s wait is under three minutes.
const MaxPace = 16.0

// Pace is how many times slower than an idle machine this one runs now: at least 1, at
// most MaxPace.
func Pace() float64 {
	pace := 1.0
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		if f := strings.Fields(string(b)); len(f) > 0 {
			if load, err := strconv.ParseFloat(f[0], 64); err == nil {
				pace = max(pace, load/float64(runtime.NumCPU()))
			}
		}
	}
	if s := os.Getenv("TEST_PACE"); s != "" {
		if m, err := strconv.ParseFloat(s, 64); err == nil && m > 0 {
			pace *= m
		}
	}
	return min(pace, MaxPace)
}

// Scaled is d at the machine's pace now: for a deadline set once, such as a context's or
// require.Eventually's. A wait that polls should use a Deadline, which follows the pace
// while it waits.
func Scaled(d time.Duration) time.Duration {
	return time.Duration(float64(d) * Pace())
}

// A Deadline is a wait's deadline that follows the machine's pace: base after its start on
// an idle machine, base times the pace on a loaded one.
type Deadline struct {
	began time.Time
	base  time.Duration
}

// Start starts a wait whose deadline is base on an idle machine.
func Start(base time.Duration) Deadline {
	return Deadline{began: time.Now(), base: base}
}

// Passed says whether the wait has taken longer than its deadline at the pace now.
func (d Deadline) Passed() bool {
	return time.Since(d.began) > Scaled(d.base)
}

// String says how long the wait took and what it was allowed, for a failure's message.
func (d Deadline) String() string {
	pace := Pace()
	return fmt.Sprintf("waited %s; allowed %s on an idle machine, %s at the pace now (%.1f×)",
		time.Since(d.began).Round(time.Millisecond), d.base, time.Duration(float64(d.base)*pace).Round(time.Millisecond), pace)
}

// ErrPassed is the cause of a Context's end when its deadline passed.
var ErrPassed = errors.New("the paced deadline passed")

// Context is a child of parent that ends when a Deadline of base passes: a deadline for a
// whole sequence of steps, each of which may wait on the context alone.
func Context(parent context.Context, base time.Duration) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancelCause(parent)
	deadline := Start(base)
	go func() {
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
				if deadline.Passed() {
					cancel(fmt.Errorf("%w: %s", ErrPassed, deadline))
					return
				}
			}
		}
	}()
	return ctx, func() { cancel(context.Canceled) }
}
