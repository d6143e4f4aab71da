package leader

import (
	"context"

	"github.com/schedulerhq/scheduler/internal/store"
)

// A paused or hung holder keeps its locks: its connection is alive and idle, so PostgreSQL
// never releases them, and a SIGSTOPped replica would keep its partitions (and, as
// coordinator, the leader lock) for ever. Its renewals stop, though: a holder whose renewal
// is older than the lease has its lock backend terminated, found by the lock it holds in
// pg_locks (never by a name, which any backend can take), and its partitions are then free
// to the replicas below their share. The backend is ended only when two surveys a heartbeat
// apart find the same one stale, so a replica that has just taken a lock and not yet
// stamped it is never taken for a paused one. The resumed replica commits nothing: the next
// election moved each fence on, and its first heartbeat fails on the dead connection and
// ends every term.

// takeOver ends the lock backends of holders found stale twice in a row (never self's).
func (p *Partitions) takeOver(ctx context.Context, s store.PartitionSurvey, self uint32) {
	seen := map[int]uint32{}
	for id, pid := range s.Stale {
		if pid == self {
			continue
		}
		if p.staleSeen[id] != pid {
			seen[id] = pid
			continue
		}
		ended, err := p.conf.DB.EndStalePartitionHolder(ctx, id, pid, p.conf.LeaseTimeout)
		for _, b := range ended {
			p.log.Warn("terminated the lock backend of a partition holder that stopped renewing (paused or hung)",
				backendAttrs(b, "partition", id, "lease", p.conf.LeaseTimeout)...)
		}
		if err != nil {
			p.log.Error("cannot end the lock backend of a paused partition holder", "partition", id, "error", err)
			continue
		}
		if len(ended) > 0 {
			p.testSignals.partitionTakenOver.Send(id)
		}
	}
	p.staleSeen = seen
}

// endStaleLeader is the same for the coordinator, run by every replica every heartbeat: the leader
// row's renewal older than the lease, seen twice with the same lock backend, ends that
// backend, and the followers waiting in pg_advisory_lock take over at once.
func (e *Elector) endStaleLeader(ctx context.Context, lastSeen uint32) uint32 {
	pid, err := e.conf.DB.StaleLeader(ctx, e.conf.LeaseTimeout)
	if err != nil || pid == 0 {
		if err != nil && ctx.Err() == nil {
			e.log.Warn("checking for a paused leader failed; retrying at the next heartbeat", "error", err)
		}
		return 0
	}
	if pid != lastSeen {
		return pid
	}
	ended, err := e.conf.DB.EndStaleLeader(ctx, pid, e.conf.LeaseTimeout)
	for _, b := range ended {
		e.log.Warn("terminated the lock backend of a leader that stopped renewing its term (paused or hung)",
			backendAttrs(b, "lease", e.conf.LeaseTimeout)...)
	}
	if err != nil {
		e.log.Error("cannot end the lock backend of a paused leader; no other replica leads until it resumes or dies", "error", err)
	}
	return 0
}
