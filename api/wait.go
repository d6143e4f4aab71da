package api

import (
	"context"
	"net/http"
	"sync"
	"time"

	"github.com/schedulerhq/scheduler/internal/backoff"
	"github.com/schedulerhq/scheduler/internal/metrics"
	"github.com/schedulerhq/scheduler/internal/store"
)

// waitRecheck is how often a ?wait re-reads its run even without a notification: the bound
// on how late a waiter learns of a finish whose notification was lost (a LISTEN session
// that dropped and reconnected) or never sent (a run abandoned by a dead leader).
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
	// The run may have finished before the LISTEN took effect: read it again only once the
	// notification can no longer be missed (or after one recheck, if listening fails).
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
// over one LISTEN session per replica, open only while a request waits.
type finishWatch struct {
	db      *store.DB
	metrics *metrics.Metrics // counts notifications that name no run

	mu      sync.Mutex
	waiters map[int64]map[chan struct{}]struct{}
	// stop ends the listening session; nil when none runs.
	stop context.CancelFunc
	// listening is closed once the current session listens.
	listening chan struct{}
}

// watch registers a waiter for run id. woken receives when the run may have finished (its
// notification, or a gap in listening); listening is closed once notifications are being
// received. done unregisters; the session ends with the last waiter.
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
	if f.stop == nil {
		ctx, cancel := context.WithCancel(context.Background())
		f.stop, f.listening = cancel, make(chan struct{})
		go f.listen(ctx, f.listening)
	}
	return ch, f.listening, func() {
		f.mu.Lock()
		defer f.mu.Unlock()
		delete(f.waiters[id], ch)
		if len(f.waiters[id]) == 0 {
			delete(f.waiters, id)
		}
		if len(f.waiters) == 0 && f.stop != nil {
			f.stop()
			f.stop = nil
		}
	}
}

// listen keeps one LISTEN session open until ctx ends, reconnecting with backoff. After a
// failed session every waiter is woken to re-read its run, since its notification may have
// been sent while nobody listened.
func (f *finishWatch) listen(ctx context.Context, listening chan struct{}) {
	var once sync.Once
	retry := backoff.New(100*time.Millisecond, waitRecheck)
	for ctx.Err() == nil {
		l, err := f.db.Listen(ctx, store.RunFinishedChannel)
		if err == nil {
			once.Do(func() { close(listening) })
			retry.Reset()
			for {
				id, err := l.Wait(ctx)
				if err != nil {
					break
				}
				if id <= 0 {
					// Any login may NOTIFY this channel. A payload that names no run wakes
					// nobody: waking every waiter to re-read (as wake(0) does after a lost
					// session) would let one statement cost a read per waiter per
					// notification.
					f.metrics.ControlNotificationsIgnored(store.RunFinishedChannel, 1)
					continue
				}
				f.wake(id)
			}
			l.Close()
		}
		if ctx.Err() == nil {
			f.wake(0)
			retry.Sleep(ctx)
		}
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
