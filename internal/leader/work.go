package leader

import (
	"context"
	"sync"
)

// work counts what a term started whose writes must commit before a voluntary resignation
// lets another replica lead (Term.Hold). Unlike a sync.WaitGroup, work may be added while
// the resignation waits: a run claimed just as the term ends registers itself late.
type work struct {
	mu   sync.Mutex
	n    int
	idle chan struct{} // closed when n drops to 0; nil while nobody waits
}

// hold registers one piece of work; release, safe to call more than once, ends it.
func (w *work) hold() (release func()) {
	w.mu.Lock()
	w.n++
	w.mu.Unlock()
	return sync.OnceFunc(func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		w.n--
		if w.n == 0 && w.idle != nil {
			close(w.idle)
			w.idle = nil
		}
	})
}

// wait returns true once no work is held, false if ctx ends first.
func (w *work) wait(ctx context.Context) bool {
	if w == nil {
		return true
	}
	w.mu.Lock()
	if w.n == 0 {
		w.mu.Unlock()
		return true
	}
	if w.idle == nil {
		w.idle = make(chan struct{})
	}
	idle := w.idle
	w.mu.Unlock()
	select {
	case <-idle:
		return true
	case <-ctx.Done():
		return false
	}
}
