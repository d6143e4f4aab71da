package engine

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/schedulerhq/scheduler/internal/backoff"
	"github.com/schedulerhq/scheduler/internal/leader"
	"github.com/schedulerhq/scheduler/internal/pglisten"
	"github.com/schedulerhq/scheduler/internal/store"
)

// The definition watch follows store.DefinitionsChannel, whose payload names the job that
// changed. Any login may NOTIFY it, with any name, so a name only says which row to read
// first, and a flood of names must stay cheap: the names of one burst are gathered, at most
// definitionsBurstNames of them; a burst with more (or the notifier's resync, or the poll)
// compares every version instead, in one read. Reads woken by notifications are at least
// definitionsCooldown apart, so a change is followed at once unless one was just followed.

const (
	// definitionsBurstNames is how many named reloads one burst may cost before the watch
	// compares every version instead.
	definitionsBurstNames = 32
	// definitionsCooldown is the least time between two reloads woken by notifications.
	definitionsCooldown = 100 * time.Millisecond
	// definitionsPollMin is the least time between two comparisons of every version that no
	// notification asked for. Every change notifies (migration 0012's trigger) and the
	// notifier resyncs after its connection was lost, so the poll only guards against what
	// neither covers; at the poll interval it read every definition of every partition each
	// couple of seconds, 1.1 M rows in a 20 000-job benchmark run, the most read statement.
	definitionsPollMin = 30 * time.Second
)

// changedDefinitions gathers what the notifications of a burst named.
type changedDefinitions struct {
	wake chan struct{} // one buffered wake-up

	mu    sync.Mutex
	names map[string]struct{}
	all   bool // compare every version: too many names, or notifications were missed
}

func newChangedDefinitions() *changedDefinitions {
	return &changedDefinitions{wake: make(chan struct{}, 1), names: map[string]struct{}{}}
}

// notified takes the notifier's events, on its goroutine.
func (c *changedDefinitions) notified(ev pglisten.Event) {
	c.mu.Lock()
	switch {
	case ev.Resync:
		c.all = true
	case c.all:
	case len(c.names) < definitionsBurstNames:
		c.names[ev.Payload] = struct{}{}
	default:
		c.all = true
		clear(c.names)
	}
	c.mu.Unlock()
	pglisten.Wake(c.wake)(ev)
}

// take returns, and forgets, what the burst named.
func (c *changedDefinitions) take() (names []string, all bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for name := range c.names {
		names = append(names, name)
	}
	all = c.all
	clear(c.names)
	c.all = false
	return names, all
}

// watchDefinitions follows definition changes for the whole term.
func (e *Engine) watchDefinitions(ctx context.Context, term leader.Term, log *slog.Logger, t *timers) {
	changed := newChangedDefinitions()
	defer e.conf.Notifier.Listen(store.DefinitionsChannel, changed.notified)()
	ticker := time.NewTicker(max(e.conf.PollInterval, definitionsPollMin))
	defer ticker.Stop()
	var last time.Time
	for {
		poll := false
		select {
		case <-ctx.Done():
			return
		case <-changed.wake:
			// The rest of the burst joins this reload.
			if !backoff.Sleep(ctx, definitionsCooldown-time.Since(last)) {
				return
			}
		case <-ticker.C:
			poll = true
		}
		last = time.Now()
		names, all := changed.take()
		var reads int
		var err error
		if all || poll {
			reads, err = 1, e.syncDefinitions(ctx, log, t)
		} else {
			var errs []error
			for _, name := range names {
				errs = append(errs, e.reloadDefinition(ctx, log, t, name))
			}
			reads, err = len(names), errors.Join(errs...)
		}
		e.testSignals.definitionsRead.Send(reads)
		if err != nil && ctx.Err() == nil {
			log.Warn("reloading runtime jobs failed; retrying at the next poll", "error", err)
		}
	}
}
