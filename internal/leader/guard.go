package leader

import (
	"context"
	"errors"
	"time"

	"github.com/schedulerhq/scheduler/internal/store"
)

// The election stays a session-level advisory lock (followers wait inside PostgreSQL, so a
// hand-over takes milliseconds), but any login on the scheduler's database may take that
// lock, or queue for it, without a privilege: a job's backend holding it would keep every
// replica from leading, and one queued behind the leader would win the next hand-over.
// So every replica, follower or leader, terminates other logins' backends on that lock
// every PollInterval (docs/design.md guarantee 12). The same loop ends the lock backend of a
// leader that stopped renewing its term (takeover.go), and covers the partitions' locks.

// refusedLogEvery rate-limits the ERROR about backends this login may not terminate: it
// stays true until an operator acts.
const refusedLogEvery = time.Minute

// guardElectionLoop ends other logins' backends on the election's lock until ctx ends.
func (e *Elector) guardElectionLoop(ctx context.Context) {
	ticker := time.NewTicker(e.conf.PollInterval)
	defer ticker.Stop()
	var lastRefusal time.Time
	for {
		qctx, cancel := context.WithTimeout(ctx, e.conf.PollInterval)
		ended, err := e.conf.DB.EndElectionInterlopers(qctx)
		if err == nil {
			e.checkDrained(qctx)
		}
		cancel()
		for _, b := range ended {
			e.log.Warn("terminated a backend of another login that held or awaited the election's lock", backendAttrs(b)...)
		}
		switch {
		case errors.Is(err, store.ErrCannotTerminate):
			e.testSignals.refused.Send(err)
			if time.Since(lastRefusal) >= refusedLogEvery {
				e.log.Error("a backend of another login holds or awaits the election's lock and this login may not end it: "+
					"while it holds the lock no replica leads", "error", err)
				lastRefusal = time.Now()
			}
		case err != nil && ctx.Err() == nil:
			e.log.Warn("checking the election's lock for other logins failed; retrying at the next poll", "error", err)
		}
		e.testSignals.guarded.Send(len(ended))
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
	}
}

// watchLeaderRenewalsLoop looks for a paused leader every heartbeat until ctx ends: a
// leader that stopped renewing is taken over within the lease and two heartbeats, where the
// guard's poll would add two polls.
func (e *Elector) watchLeaderRenewalsLoop(ctx context.Context) {
	ticker := time.NewTicker(e.conf.HeartbeatInterval)
	defer ticker.Stop()
	var staleLeader uint32 // the paused leader's lock backend seen at the last look
	for {
		qctx, cancel := context.WithTimeout(ctx, e.conf.HeartbeatInterval)
		staleLeader = e.endStaleLeader(qctx, staleLeader)
		cancel()
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
	}
}

// backendAttrs are a terminated backend's log attributes, then args.
func backendAttrs(b store.Backend, args ...any) []any {
	return append([]any{"pid", b.PID, "user", b.User, "application_name", b.ApplicationName,
		"client_addr", b.ClientAddr}, args...)
}
