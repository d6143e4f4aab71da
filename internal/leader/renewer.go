package leader

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/schedulerhq/scheduler/internal/store"
)

// The partitions' renewals run apart from their elections. The heartbeat's other steps wait
// on the database in ways a renewal must not: a survey of pg_locks, an election waiting for
// the old term's transactions, a takeover. When they shared one loop, a saturated machine
// (100 000 jobs due on one minute, two cores) made a round of them outlast the lease; the
// next renewal then began past its deadline, every term of the replica ended, the others
// took the partitions, and the same happened to them: over a thousand hand-overs in three
// minutes. So the renewer has a goroutine and a connection of its own (no lock lives on it:
// a renewal is an UPDATE fenced by epoch and term id, which proves as much on any
// connection), renews every HeartbeatInterval, and ends the terms only when no renewal
// succeeded for a whole lease. The lock session is watched by the heartbeat instead
// (Partitions.lead pings it), since its death releases the locks.

// renewer renews the elected terms of a Partitions until its context ends.
type renewer struct {
	p *Partitions

	mu       sync.Mutex
	replaced []store.Fence // terms found replaced, ended, for the heartbeat to forget and unlock
	lost     chan error
}

func newRenewer(p *Partitions) *renewer {
	return &renewer{p: p, lost: make(chan error, 1)}
}

// run renews every HeartbeatInterval until ctx ends or the renewals fail for a lease, when
// it ends every term and reports the error on lost.
func (r *renewer) run(ctx context.Context) {
	var conn *store.PartitionSession
	defer func() {
		if conn != nil {
			conn.Close()
		}
	}()
	lastOK := time.Now()
	ticker := time.NewTicker(r.p.conf.HeartbeatInterval)
	defer ticker.Stop()
	for {
		if r.p.beforeTick != nil {
			r.p.beforeTick()
		}
		if ctx.Err() != nil {
			return
		}
		start := time.Now()
		err := r.renew(ctx, &conn, lastOK.Add(r.p.conf.LeaseTimeout))
		switch {
		case err == nil:
			lastOK = start
		case ctx.Err() != nil:
			return
		case !time.Now().Before(lastOK.Add(r.p.conf.LeaseTimeout)):
			// Fail closed: nothing proved this replica still holds its terms for a lease.
			r.p.endElected("lock_lost", err)
			r.lost <- err
			return
		default:
			r.p.log.Warn("renewing the partitions' terms failed; retrying within the lease", "error", err,
				"lease_ends_in", time.Until(lastOK.Add(r.p.conf.LeaseTimeout)).Round(time.Millisecond))
		}
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
	}
}

// renew renews the elected terms once, before deadline, on *conn (opened, or opened again
// after a failure). A term the statement did not renew was replaced by another replica's
// election: it ends at once and is queued for the heartbeat to forget.
func (r *renewer) renew(ctx context.Context, conn **store.PartitionSession, deadline time.Time) error {
	fences, pending := r.p.electedFences(), r.p.pendingElections()
	if len(fences) == 0 && len(pending) == 0 {
		return nil
	}
	rctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	if *conn == nil {
		c, err := r.p.conf.DB.OpenPartitionSession(rctx)
		if err != nil {
			return fmt.Errorf("connect for the partitions' renewals: %w", err)
		}
		*conn = c
	}
	var renewed map[int]bool
	var err error
	if len(fences) > 0 {
		renewed, err = (*conn).Renew(rctx, fences)
	}
	if err == nil && len(pending) > 0 {
		err = (*conn).Stamp(rctx, pending)
	}
	if err != nil {
		(*conn).Close()
		*conn = nil
		return fmt.Errorf("heartbeat of the partitions' terms failed: %w", err)
	}
	for _, f := range fences {
		if !renewed[f.Partition] {
			r.p.endElectedTerm(f, "fenced", fmt.Errorf("partition %d has a new term: another replica was elected", f.Partition))
			r.mu.Lock()
			r.replaced = append(r.replaced, f)
			r.mu.Unlock()
		}
	}
	return nil
}

// takeReplaced returns the terms found replaced since the last call.
func (r *renewer) takeReplaced() []store.Fence {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.replaced
	r.replaced = nil
	return out
}

// electedFences are the fences of the terms elected and not ended.
func (p *Partitions) electedFences() []store.Fence {
	p.mu.Lock()
	defer p.mu.Unlock()
	var fences []store.Fence
	for _, h := range p.held {
		if h.term.Ctx != nil && h.term.Ctx.Err() == nil {
			fences = append(fences, h.term.Fence())
		}
	}
	return fences
}

// pendingElections are the partitions whose lock this replica holds and whose election has
// not happened yet.
func (p *Partitions) pendingElections() []int {
	p.mu.Lock()
	defer p.mu.Unlock()
	var ids []int
	for id, h := range p.held {
		if h.term.Ctx == nil && h.drained == nil {
			ids = append(ids, id)
		}
	}
	return ids
}

// endElectedTerm ends the term of f if it is still the one held, from the renewer's
// goroutine; the heartbeat forgets the partition later.
func (p *Partitions) endElectedTerm(f store.Fence, why string, reason error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if h := p.held[f.Partition]; h != nil && h.term.Ctx != nil && h.term.Fence() == f {
		p.endTerm(f.Partition, h, why, reason)
	}
}

// endElected ends every elected term, from the renewer's goroutine.
func (p *Partitions) endElected(why string, reason error) {
	for _, f := range p.electedFences() {
		p.endElectedTerm(f, why, reason)
	}
}
