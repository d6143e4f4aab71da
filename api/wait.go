package api

import (
	"context"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/schedulerhq/scheduler/internal/metrics"
	"github.com/schedulerhq/scheduler/internal/pglisten"
	"github.com/schedulerhq/scheduler/internal/store"
)

// waitRecheck is how often a ?wait re-reads its run even without a notification: the bound
// on how late a waiter learns of a finish whose notification was lost (the notifier's
// connection dropped and reconnected) or sent late (a dead leader's run, announced when the
// next leader marks it abandoned).
const waitRecheck = time.Second

// awaitRun waits until the run finishes, d passes, or the client goes away. It answers 200
// with the finished run, or 202 with the run as last seen. It is woken by the run's
// notification on store.RunFinishedChannel, and re-reads the run every s.waitRecheck in
// case a notification was lost.
func (s *Server) awaitRun(ctx context.Context, run *store.Run, d time.Duration) (*store.Run, int) {
	if run.Finished() {
		return run, http.StatusOK
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	recheck := time.NewTicker(s.waitRecheck)
	defer recheck.Stop()
	woken, listening, done := s.finishes.watch(run.ID)
	defer done()
	// The run may have finished before the listening took effect: read it again only once
	// the notification can no longer be missed (or after one recheck, if listening fails).
	select {
	case <-ctx.Done():
		return run, http.StatusAccepted
	case <-timer.C:
		return run, http.StatusAccepted
	case <-listening:
	case <-recheck.C:
	}
	for {
		qctx, cancel := context.WithTimeout(ctx, queryTimeout)
		latest, err := s.cfg.DB.Run(qctx, run.ID)
		cancel()
		// A failed read does not end the wait; the deadline does.
		if err == nil {
			run = latest
		}
		if run.Finished() {
			return run, http.StatusOK
		}
		select {
		case <-ctx.Done():
			return run, http.StatusAccepted
		case <-timer.C:
			return run, http.StatusAccepted
		case <-woken:
		case <-recheck.C:
		}
	}
}

// finishWatch hands the run-finished notifications to the requests waiting on those runs,
// through the replica's notifier, subscribed only while a request waits.
type finishWatch struct {
	notifier *pglisten.Notifier // nil: waits re-read every waitRecheck only
	metrics  *metrics.Metrics   // counts notifications that name no run

	mu      sync.Mutex
	waiters map[int64]map[chan struct{}]struct{}
	// unlisten ends the subscription; nil when there is none.
	unlisten func()
	// listening is closed once the current subscription's channel is listened on.
	listening chan struct{}
}

// watch registers a waiter for run id. woken receives when the run may have finished (its
// notification, or a gap in listening); listening is closed once notifications are being
// received. done unregisters; the subscription ends with the last waiter.
func (f *finishWatch) watch(id int64) (woken <-chan struct{}, listening <-chan struct{}, done func()) {
	ch := make(chan struct{}, 1)
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.waiters == nil {
		f.waiters = map[int64]map[chan struct{}]struct{}{}
	}
	if f.waiters[id] == nil {
		f.waiters[id] = map[chan struct{}]struct{}{}
	}
	f.waiters[id][ch] = struct{}{}
	if f.unlisten == nil && f.notifier != nil {
		f.listening = make(chan struct{})
		f.unlisten = f.notifier.Listen(store.RunFinishedChannel, f.notified(f.listening))
	}
	return ch, f.listening, func() {
		f.mu.Lock()
		defer f.mu.Unlock()
		delete(f.waiters[id], ch)
		if len(f.waiters[id]) == 0 {
			delete(f.waiters, id)
		}
		if len(f.waiters) == 0 && f.unlisten != nil {
			f.unlisten()
			f.unlisten = nil
		}
	}
}

// notified is one subscription's handler. Its first resync closes listening (each waiter
// then reads its run once); a later one, after a gap in listening, wakes every waiter to
// re-read its run, since its notification may have been sent while nobody listened.
func (f *finishWatch) notified(listening chan struct{}) pglisten.Func {
	var once sync.Once
	return func(ev pglisten.Event) {
		if ev.Resync {
			first := false
			once.Do(func() { close(listening); first = true })
			if !first {
				f.wake(0)
			}
			return
		}
		id, _ := strconv.ParseInt(ev.Payload, 10, 64)
		if id <= 0 {
			// Any login may NOTIFY this channel. A payload that names no run wakes nobody:
			// waking every waiter to re-read (as a resync does) would let one statement
			// cost a read per waiter per notification.
			f.metrics.ControlNotificationsIgnored(store.RunFinishedChannel, 1)
			return
		}
		f.wake(id)
	}
}

// wake signals the waiters of run id, or every waiter when id is 0 (after a gap in
// listening). A waiter's channel holds one wake-up, so a burst of notifications for its run
// costs it one re-read.
func (f *finishWatch) wake(id int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for runID, chans := range f.waiters {
		if id != 0 && runID != id {
			continue
		}
		for ch := range chans {
			select {
			case ch <- struct{}{}:
			default:
			}
		}
	}
}
