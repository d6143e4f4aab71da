package leader

import (
	"fmt"
	"time"

	"github.com/schedulerhq/scheduler/internal/store"
)

// failedOver says why the database failed over since the term old began, or "". Two signs,
// either enough: the timeline changed (a standby was promoted: with asynchronous replication
// it may lack commits the old primary acknowledged), or the row this election found is
// older than a term this replica saw (an election, or more, was lost with the old primary;
// this catches a rollback the timeline does not show, such as a restore). seen is the
// newest row of the term (the leader's, or a partition's) this replica knows of.
func failedOver(seen, old, cur store.LeaderRow) string {
	switch {
	case old.Timeline != 0 && cur.Timeline != old.Timeline:
		return fmt.Sprintf("timeline %d became %d", old.Timeline, cur.Timeline)
	case seen.Epoch > old.Epoch || (seen.Epoch == old.Epoch && seen.TermID != old.TermID):
		return fmt.Sprintf("the term's row went back from %s to %s", seen.Fence(), old.Fence())
	}
	return ""
}

// handover is how long the cluster went without a leader before the term cur, or -1 when
// that cannot be known honestly. It runs from the old leader's last sign of life to cur's
// since, on the database clock:
//   - a leader that died or hung still reads as leading in scheduler_instances: its last
//     heartbeat there (at most InstanceHeartbeat before it stopped, so the figure may be
//     high by that much);
//   - a leader that resigned or stepped down marked its row a follower: the lock was
//     released when this replica got it, waiting in pg_advisory_lock. (A leader that
//     stepped down before the server noticed its dead lock session is counted from the
//     release, so that figure may be low by the server's detection time.)
//
// This replica's own previous term is counted from its step-down, on its own clock. The
// first leader of a cluster, or a replica that restarted under the same instance id (its
// new heartbeats overwrite the old leader's row), gets -1.
func (e *Elector) handover(old, cur store.LeaderRow, taken store.LockTaken) time.Duration {
	switch {
	case old.InstanceID == "":
		return -1
	case old.InstanceID == e.conf.InstanceID:
		if e.steppedDownAt.IsZero() {
			return -1
		}
		return time.Since(e.steppedDownAt)
	}
	stop := taken.At
	if taken.PreviousLastSeen != nil && taken.PreviousLastSeen.Before(stop) {
		stop = *taken.PreviousLastSeen
	}
	return max(cur.Since.Sub(stop), 0)
}
