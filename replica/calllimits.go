package replica

import (
	"context"
	"log/slog"
	"time"

	"github.com/schedulerhq/scheduler/internal/config"
	"github.com/schedulerhq/scheduler/internal/store"
	"github.com/schedulerhq/scheduler/internal/targets"
	"github.com/schedulerhq/scheduler/internal/testsignal"
)

// The call-limit poller's settings: callLimitsTimeout bounds one read of the namespaces'
// bounds, and callLimitsIntervalDefault spaces the reads when callLimits.every is unset.
const (
	callLimitsTimeout         = 5 * time.Second
	callLimitsIntervalDefault = config.PollIntervalDefault
)

// callLimits is the poller that keeps the caller's per-namespace bounds on calls in flight at the namespaces'
// max_concurrent_calls: read at start and every poll interval, so an admin's change applies
// within seconds on whichever replica leads, without a restart. A failed read keeps the
// bounds last read (a database that does not answer makes no calls meanwhile anyway).
type callLimits struct {
	db     *store.DB
	caller *targets.Caller
	every  time.Duration
	log    *slog.Logger
	// refreshed is the test signal of a pass that read the bounds, with how many namespaces
	// have one.
	refreshed *testsignal.Signal[int]
}

func (l callLimits) run(ctx context.Context) {
	every := l.every
	if every <= 0 {
		every = callLimitsIntervalDefault
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			l.refresh(ctx)
		}
	}
}

func (l callLimits) refresh(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, callLimitsTimeout)
	defer cancel()
	limits, err := l.db.NamespaceCallLimits(ctx)
	if err != nil {
		if ctx.Err() == nil && l.log != nil {
			l.log.Warn("reading the namespaces' max_concurrent_calls failed; the bounds last read still apply", "error", err)
		}
		return
	}
	l.caller.SetNamespaceLimits(limits)
	if l.refreshed != nil {
		l.refreshed.Send(len(limits))
	}
}
