package leader

import (
	"context"
	"errors"
	"hash/fnv"
	"slices"
	"time"

	"github.com/schedulerhq/scheduler/internal/store"
)

// Each replica's fair share of the N partitions among R live replicas is floor(N/R) or
// ceil(N/R), the coordinator's partition 0 counting as one of its holder's. The hysteresis
// is in what moves a partition: a replica takes free partitions up to the floor, one more
// (up to the ceiling) only while no other replica is below the floor, and gives up only what
// it holds above the ceiling, or one above the floor when another is below it and nothing is
// free. So 64 partitions on 3 replicas settle at 22, 21, 21, and a fourth joining takes 16
// partitions released by the others, no more.
//
// A replica's first survey only looks: it takes nothing until the next heartbeat. Replicas
// started together (a cluster's first start, a deployment scaled from zero) write their
// instance rows within moments of each other, but the first to survey would count itself
// alone and take every partition, and with them load every job, only to give two thirds up
// a heartbeat later (18 hand-overs as a 100 000-job bench's three replicas started). One
// heartbeat later, all of them are counted.
//
// A replica counted live that takes nothing (its loop stuck while its instance row stays
// fresh) would leave its share unheld for ever; so a partition found free for a whole lease
// is an orphan, taken by any replica whatever its share, and the shares even out once that
// replica takes part again.

// share is what plan decided: partitions to release and to try to take.
type share struct {
	release int
	acquire []int
}

// plan decides this replica's moves from a survey.
func (p *Partitions) plan(s store.PartitionSurvey) share {
	me := p.conf.InstanceID
	mine := 0
	for _, h := range p.held {
		if h.drained == nil {
			mine++
		}
	}
	if p.drained {
		return share{release: mine}
	}
	if s.Coordinator == me {
		mine++
	}
	// A replica whose renewals lapsed stays out of the shares, and for a lease after its
	// partitions were taken from it (its instance row may still look fresh: a hung loop), so
	// its partitions are taken at once rather than left to the orphans' lease.
	now := time.Now()
	for _, r := range s.Lapsed {
		p.pausedAt[r] = now
	}
	for r, at := range p.pausedAt {
		if now.Sub(at) > p.conf.LeaseTimeout {
			delete(p.pausedAt, r)
		}
	}
	live := []string{}
	for _, r := range s.Live {
		if _, paused := p.pausedAt[r]; !paused && r != me {
			live = append(live, r)
		}
	}
	live = append(live, me)
	n, r := p.conf.Count, len(live)
	floor, ceil := n/r, (n+r-1)/r
	p.noteFree(s.Free)
	orphans := p.freeFor(p.conf.LeaseTimeout)
	counts := map[string]int{}
	for _, h := range s.Holders {
		counts[h]++
	}
	if s.Coordinator != "" {
		counts[s.Coordinator]++
	}
	otherBelowFloor := false
	for _, o := range live {
		if o != me && counts[o] < floor {
			otherBelowFloor = true
		}
	}
	if !p.looked {
		p.looked = true
		return share{}
	}
	switch {
	case mine > ceil:
		return share{release: mine - ceil}
	case mine > floor && len(s.Free) == 0 && otherBelowFloor:
		return share{release: 1}
	case mine < floor:
		return share{acquire: p.pick(s.Free, max(floor-mine, len(orphans)))}
	case mine < ceil && !otherBelowFloor:
		// Only a partition free for two heartbeats: one just released is for the replica
		// below its floor (a newcomer this replica's survey may not count yet).
		return share{acquire: p.pick(p.freeFor(2*p.conf.HeartbeatInterval), max(1, len(orphans)))}
	}
	return share{acquire: orphans}
}

// noteFree notes when each free partition was first found free.
func (p *Partitions) noteFree(free []int) {
	now := time.Now()
	since := make(map[int]time.Time, len(free))
	for _, id := range free {
		t, ok := p.freeSince[id]
		if !ok {
			t = now
		}
		since[id] = t
	}
	p.freeSince = since
}

// freeFor returns the partitions found free for longer than d that this replica does not
// hold, in order.
func (p *Partitions) freeFor(d time.Duration) []int {
	var out []int
	for id, t := range p.freeSince {
		if time.Since(t) > d && p.held[id] == nil {
			out = append(out, id)
		}
	}
	slices.Sort(out)
	return out
}

// pick chooses up to n of the free partitions, starting at an offset of this replica's own,
// so that replicas starting together do not all try the same ones first.
func (p *Partitions) pick(free []int, n int) []int {
	if n <= 0 || len(free) == 0 {
		return nil
	}
	h := fnv.New32a()
	_, _ = h.Write([]byte(p.conf.InstanceID))
	off := int(h.Sum32() % uint32(len(free)))
	out := make([]int, 0, min(n, len(free)))
	for i := 0; i < len(free) && len(out) < n; i++ {
		if f := free[(off+i)%len(free)]; p.held[f] == nil {
			out = append(out, f)
		}
	}
	return out
}

// rebalance surveys the partitions, takes over stale ones, and moves toward the share.
func (p *Partitions) rebalance(ctx context.Context, session *store.PartitionSession) error {
	qctx, cancel := context.WithTimeout(ctx, p.conf.LeaseTimeout)
	defer cancel()
	s, err := p.conf.DB.SurveyPartitions(qctx, p.conf.LeaseTimeout)
	if err != nil {
		return err
	}
	if !p.drained {
		if p.drained, err = p.conf.DB.Drained(qctx, p.conf.InstanceID); err != nil {
			return err
		}
		if p.drained {
			p.log.Warn("drained by an operator: releasing every partition and taking none until restarted")
		}
	}
	p.takeOver(qctx, s, session.PID())
	sh := p.plan(s)
	for _, id := range sh.acquire {
		ok, err := session.TryLock(qctx, id)
		if err != nil {
			return err
		}
		if ok {
			p.mu.Lock()
			p.held[id] = &heldPartition{lockedAt: time.Now()}
			p.mu.Unlock()
		}
	}
	if len(sh.acquire) > 0 {
		p.elect(ctx, session)
	}
	p.releaseSome(sh.release)
	return nil
}

// elect runs the elections of the partitions whose lock this replica took. Each waits at
// most a quarter of a heartbeat for the old term's transactions (the session is shared with
// the heartbeat), and, once the lease has passed since the lock was taken, ends what still
// holds it up.
func (p *Partitions) elect(ctx context.Context, session *store.PartitionSession) {
	for id, h := range p.held {
		if h.term.Ctx != nil || h.drained != nil {
			continue
		}
		waited := time.Since(h.lockedAt)
		old, cur, terminated, err := session.Elect(ctx, id, p.conf.InstanceID, p.conf.HeartbeatInterval/4, waited >= p.conf.LeaseTimeout)
		for _, b := range terminated {
			p.log.Warn("terminated a backend that held up a partition's election beyond the lease",
				backendAttrs(b, "partition", id, "old_holder", old.InstanceID, "old_epoch", old.Epoch)...)
		}
		switch {
		case errors.Is(err, store.ErrElectionWaiting):
			continue
		case err != nil:
			p.log.Warn("partition election failed; releasing its lock", "partition", id, "error", err)
			p.forget(id)
			_ = session.Unlock(ctx, store.Fence{Partition: id})
			continue
		}
		// Compared with the newest term seen before this one: this one is newer than old.
		failed := failedOver(p.seen[id], old, cur)
		p.seen[id] = cur
		term, end := begin(context.Background(), Term{Partition: id, Epoch: cur.Epoch, TermID: cur.TermID,
			Since: cur.Since, FailedOver: failed})
		p.mu.Lock()
		h.term, h.end = term, end
		subs := append([]*Subscription(nil), p.subs[id]...)
		p.mu.Unlock()
		handover := old.InstanceID != "" && old.InstanceID != p.conf.InstanceID
		p.conf.Metrics.PartitionElected(id, handover)
		p.conf.Metrics.SetPartitionsHeld(len(p.held))
		p.log.Info("elected for a partition", "partition", id, "epoch", cur.Epoch, "term_id", cur.TermID,
			"old_holder", old.InstanceID, "old_epoch", old.Epoch, "waited", waited)
		for _, s := range subs {
			select {
			case s.ch <- h.term:
			default:
				p.log.Error("a partition subscriber is not reading its terms; dropped one", "partition", id, "epoch", cur.Epoch)
			}
		}
		p.testSignals.partitionElected.Send(id)
	}
}

// releaseSome starts the voluntary release of n elected partitions, the highest first.
func (p *Partitions) releaseSome(n int) {
	var ids []int
	for id, h := range p.held {
		if h.drained == nil {
			ids = append(ids, id)
		}
	}
	// Highest first: predictable in the logs, and the low partitions stay where they are.
	slices.SortFunc(ids, func(a, b int) int { return b - a })
	for _, id := range ids[:min(n, len(ids))] {
		p.drain(id, p.held[id], "released")
	}
}

// drain ends a term voluntarily (Term.drain): its Ctx ends at once, its runs in flight go on
// (RunsCtx) for up to RunGrace, its Term.Holds are awaited up to DrainTimeout, and its lock
// is released (unlockDrained, at a heartbeat) only then, so that what they finish commits
// under its fence and is not made again by the next holder.
func (p *Partitions) drain(id int, h *heldPartition, why string) {
	done := make(chan struct{})
	p.mu.Lock() // the renewer reads it
	h.drained = done
	p.mu.Unlock()
	if h.term.Ctx == nil { // never elected: nothing to wait for
		close(done)
		return
	}
	p.endTerm(id, h, why, nil)
	go func() {
		defer close(done)
		if !h.term.drain(h.end, p.conf.RunGrace, p.conf.DrainTimeout) {
			p.log.Warn("runs still recording at the drain timeout; releasing the partition anyway",
				"partition", id, "epoch", h.term.Epoch, "drain_timeout", p.conf.DrainTimeout)
		}
	}()
}

// unlockDrained releases the locks of the partitions whose drain has finished.
func (p *Partitions) unlockDrained(ctx context.Context, session *store.PartitionSession) {
	for id, h := range p.held {
		if h.drained == nil {
			continue
		}
		select {
		case <-h.drained:
		default:
			continue
		}
		if err := session.Unlock(context.WithoutCancel(ctx), h.term.Fence()); err != nil {
			p.log.Warn("releasing a partition failed; it stays held until the next heartbeat", "partition", id, "error", err)
			continue
		}
		p.forget(id)
		p.log.Info("released a partition", "partition", id, "epoch", h.term.Epoch)
	}
}

// releaseAll gives every partition up on shutdown, waiting for the drains (bounded by
// DrainTimeout) with a fresh context, because we want to give them up even during a
// shutdown; closing the session releases what the unlock could not.
func (p *Partitions) releaseAll(session *store.PartitionSession) {
	for id, h := range p.held {
		if h.drained == nil {
			p.drain(id, h, "shutdown")
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), p.conf.DrainTimeout+resignTimeout)
	defer cancel()
	for _, h := range p.held {
		select {
		case <-h.drained:
		case <-ctx.Done():
		}
	}
	p.unlockDrained(ctx, session)
	p.endAll("shutdown", errors.New("shutting down"))
	session.Close()
}
