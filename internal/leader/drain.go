package leader

import "context"

// An operator's drain (POST /v1/instances/{id}/drain) is a row of scheduler_control naming
// the replica, written with its audit row. The replica reads it at its guard's next poll
// (the Elector) and heartbeat (Partitions): it releases its partitions, steps down as
// coordinator if it is, and takes nothing until it restarts, so that its node can be taken
// down with its partitions moved by release (their runs drained) rather than after a lease.

// checkDrained reads whether this replica was drained, once it was not.
func (e *Elector) checkDrained(ctx context.Context) {
	if e.isDrained() {
		return
	}
	drained, err := e.conf.DB.Drained(ctx, e.conf.InstanceID)
	if err != nil || !drained {
		return
	}
	e.drainedOnce.Do(func() {
		e.log.Warn("drained by an operator: stepping down if leading, and standing for no election until restarted")
		close(e.drained)
	})
}

// isDrained reports whether an operator drained this replica.
func (e *Elector) isDrained() bool {
	select {
	case <-e.drained:
		return true
	default:
		return false
	}
}
