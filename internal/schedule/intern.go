package schedule

import (
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"
	"weak"
)

// New shares one Schedule among the definitions that ask for the same one. A parsed cron
// schedule is about 260 bytes, and a cluster's jobs repeat a few schedules: 100 000 jobs on
// "* * * * *" held 26 MB of identical schedules across the replicas, a tenth of each
// replica's heap between slots. A Schedule is immutable, so sharing it changes nothing but
// the memory. The table holds its schedules weakly: a schedule no definition uses any more
// is collected, and its entry removed with it.

// internKey is everything New's result depends on.
type internKey struct {
	specs       string // each spec prefixed with its length: no two lists spell alike
	dst         DST
	from, until time.Time
}

var interned sync.Map // internKey → weak.Pointer[Schedule]

func keyOf(specs []string, o Options) internKey {
	var b strings.Builder
	for _, s := range specs {
		b.WriteString(strconv.Itoa(len(s)))
		b.WriteByte(':')
		b.WriteString(s)
	}
	return internKey{specs: b.String(), dst: o.DST, from: o.From, until: o.Until}
}

// sharedSchedule is the live schedule made for k, if any.
func sharedSchedule(k internKey) *Schedule {
	if v, ok := interned.Load(k); ok {
		return v.(weak.Pointer[Schedule]).Value()
	}
	return nil
}

// share makes s the schedule for k, unless another one made for k meanwhile is still live,
// which it returns instead.
func share(k internKey, s *Schedule) *Schedule {
	w := weak.Make(s)
	for {
		old, loaded := interned.LoadOrStore(k, w)
		if loaded {
			if kept := old.(weak.Pointer[Schedule]).Value(); kept != nil {
				return kept
			}
			if !interned.CompareAndSwap(k, old, w) {
				continue
			}
		}
		// Only w's entry goes with s: a later schedule for k may have replaced it.
		runtime.AddCleanup(s, func(k internKey) { interned.CompareAndDelete(k, w) }, k)
		return s
	}
}
