package engine

import (
	"context"
	"log/slog"
	"time"

	"github.com/schedulerhq/scheduler/internal/backoff"
	"github.com/schedulerhq/scheduler/internal/leader"
	"github.com/schedulerhq/scheduler/internal/store"
)

// Listening for definition changes: a NOTIFY on store.DefinitionsChannel names the job that
// changed (a reload of that one); a reconnect or the poll compares every version (a full
// sync), so a notification lost while the listener was down costs one poll interval.

// watchDefinitions follows definition changes for the whole term.
func (e *Engine) watchDefinitions(ctx context.Context, term leader.Term, log *slog.Logger, t *timers) {
	changed := make(chan string, 256)
	go func() {
		retry := backoff.New(min(100*time.Millisecond, e.conf.PollInterval), e.conf.PollInterval)
		for ctx.Err() == nil {
			l, err := e.conf.DB.Listen(ctx, store.DefinitionsChannel)
			if err == nil {
				retry.Reset()
				changed <- "" // a full comparison: changes made before LISTEN took effect
				for {
					var name string
					if name, err = l.WaitPayload(ctx); err != nil {
						break
					}
					select {
					case changed <- name:
					default: // the poll's comparison catches up
					}
				}
				l.Close()
			}
			if ctx.Err() == nil {
				d := retry.Next()
				log.Warn("listening for definition changes failed; polling until reconnected", "error", err, "retry_in", d)
				backoff.Sleep(ctx, d)
			}
		}
	}()
	ticker := time.NewTicker(e.conf.PollInterval)
	defer ticker.Stop()
	for {
		var name string
		select {
		case <-ctx.Done():
			return
		case name = <-changed:
		case <-ticker.C:
		}
		var err error
		if name == "" {
			err = e.syncDefinitions(ctx, log, t)
		} else {
			err = e.reloadDefinition(ctx, log, t, name)
		}
		if err != nil && ctx.Err() == nil {
			log.Warn("reloading runtime jobs failed; retrying at the next poll", "error", err)
		}
	}
}
