package leader

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/schedulerhq/scheduler/internal/backoff"
	"github.com/schedulerhq/scheduler/internal/metrics"
	"github.com/schedulerhq/scheduler/internal/pglisten"
	"github.com/schedulerhq/scheduler/internal/store"
)

// Partitions 1..N-1 (docs/design.md, "Partitions") are led each under its own advisory
// lock, epoch and term, shared fairly among the live replicas. Unlike the coordinator's
// election, nobody waits inside pg_advisory_lock: each heartbeat a replica reads the
// partitions (store.SurveyPartitions), takes free ones with pg_try_advisory_lock while it
// holds fewer than its share (shares.go), releases what it holds above it, and takes over
// the partitions of a paused holder (takeover.go). All of one replica's locks live on one
// connection; its held terms are renewed in one statement by a renewer on a connection of
// its own (renewer.go).

// PartitionsConfig configures Partitions.
type PartitionsConfig struct {
	DB *store.DB
	// Notifier is the replica's listening connection. Nothing here listens yet: a drain and
	// the shares are read at each heartbeat, which bounds how late either is obeyed.
	Notifier *pglisten.Notifier
	// InstanceID names this replica, as its scheduler_instances row (kept by the Elector).
	InstanceID string
	Log        *slog.Logger
	// Count is SCHEDULER_PARTITIONS; partitions 1..Count-1 are elected here (0 is the
	// coordinator's, the Elector's).
	Count int
	// LeaseTimeout bounds how long a heartbeat may fail before every term ends, and how old
	// another holder's renewal may be before its partitions are taken from it. Required.
	LeaseTimeout time.Duration
	// HeartbeatInterval is how often the terms are renewed and the shares reconsidered.
	// Default lease/5.
	HeartbeatInterval time.Duration
	// DrainTimeout is how long a voluntary release waits for its term's Term.Hold()s.
	// Default drainTimeoutDefault.
	DrainTimeout time.Duration
	// RunGrace is Config.RunGrace, for the partitions' terms. Default runGraceDefault.
	RunGrace time.Duration
	Metrics  *metrics.Metrics // nil: none
}

// Partitions runs this replica's side of the partitions' elections.
type Partitions struct {
	conf PartitionsConfig
	log  *slog.Logger

	mu   sync.Mutex
	subs map[int][]*Subscription
	held map[int]*heldPartition // by partition; written by Run's goroutine under mu

	// Touched only by Run's goroutine.
	staleSeen map[int]uint32          // partition → the stale holder's pid seen at the last survey
	freeSince map[int]time.Time       // partition → when the surveys began to find it free
	pausedAt  map[string]time.Time    // replica → when a survey last found its renewals lapsed
	seen      map[int]store.LeaderRow // partition → the newest term row this replica knows of
	drained   bool
	looked    bool // a survey was planned on: the first only looks (shares.go)

	testSignals testSignals
	beforeTick  func() // test hook: blocks the loops as a paused process would
	// slowHeartbeat, a test hook, blocks the heartbeat's elections and shares only, as a
	// saturated database or machine would slow them.
	slowHeartbeat func()
	sessionPID    atomic.Uint32 // the lock session's backend, for tests that end it
}

// heldPartition is a partition whose lock this replica holds: elected (term set), waiting
// for its election (term.Ctx nil), or draining before the unlock.
type heldPartition struct {
	term     Term
	end      ending
	lockedAt time.Time
	drained  chan struct{} // non-nil while draining; closed once the holds are released
	// ending is set by the first endTerm: the heartbeat and the renewer may both end it.
	ending atomic.Bool
}

// NewPartitions checks c and returns Partitions; Run starts it.
func NewPartitions(c PartitionsConfig) (*Partitions, error) {
	if c.DB == nil || c.InstanceID == "" {
		return nil, errors.New("leader: PartitionsConfig.DB and InstanceID are required")
	}
	if c.Count < 1 {
		return nil, fmt.Errorf("leader: PartitionsConfig.Count %d must be at least 1", c.Count)
	}
	if c.LeaseTimeout <= 0 {
		return nil, fmt.Errorf("leader: PartitionsConfig.LeaseTimeout %s must be above 0", c.LeaseTimeout)
	}
	if c.HeartbeatInterval <= 0 {
		c.HeartbeatInterval = c.LeaseTimeout / 5
	}
	if c.HeartbeatInterval >= c.LeaseTimeout {
		return nil, fmt.Errorf("leader: HeartbeatInterval %s must be shorter than LeaseTimeout %s", c.HeartbeatInterval, c.LeaseTimeout)
	}
	if c.DrainTimeout <= 0 {
		c.DrainTimeout = drainTimeoutDefault
	}
	if c.RunGrace <= 0 {
		c.RunGrace = runGraceDefault
	}
	if c.Log == nil {
		c.Log = slog.Default()
	}
	return &Partitions{conf: c, log: c.Log.With("instance_id", c.InstanceID), subs: map[int][]*Subscription{},
		held: map[int]*heldPartition{}, staleSeen: map[int]uint32{}, freeSince: map[int]time.Time{},
		pausedAt: map[string]time.Time{}, seen: map[int]store.LeaderRow{}}, nil
}

// Subscribe returns the terms of partition p on this replica, in order. A subscriber that
// arrives during a term gets it at once.
func (p *Partitions) Subscribe(partition int) *Subscription {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := &Subscription{ch: make(chan Term, subscriberBuffer)}
	p.subs[partition] = append(p.subs[partition], s)
	if h := p.held[partition]; h != nil && h.term.Ctx != nil && h.term.Ctx.Err() == nil {
		s.ch <- h.term
	}
	return s
}

// Held returns the partitions this replica leads now, in order.
func (p *Partitions) Held() []int {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []int
	for id, h := range p.held {
		if h.term.Ctx != nil && h.term.Ctx.Err() == nil {
			out = append(out, id)
		}
	}
	slices.Sort(out)
	return out
}

// Run takes part in the partitions' elections until ctx ends, then releases every partition
// (waiting up to DrainTimeout for the terms' holds) and returns. A cluster of one partition
// has nothing to elect here.
func (p *Partitions) Run(ctx context.Context) {
	if p.conf.Count == 1 {
		<-ctx.Done()
		return
	}
	for ctx.Err() == nil {
		var session *store.PartitionSession
		err := backoff.Retry(ctx, reconnectMin, reconnectMax, func() (err error) {
			session, err = p.conf.DB.OpenPartitionSession(ctx)
			return err
		}, func(err error, d time.Duration) error {
			p.log.Warn("cannot reach PostgreSQL for the partition locks; retrying", "error", err, "retry_in", d)
			return nil
		})
		if err != nil {
			return // ctx ended
		}
		p.lead(ctx, session)
	}
}

// lead runs the heartbeat on one lock session until the session fails or ctx ends. The
// terms are renewed by a renewer of their own (renewer.go), which ends them all when no
// renewal succeeded for a lease (fail closed); the heartbeat pings the lock session, whose
// death releases every lock, and runs the elections and the shares.
func (p *Partitions) lead(ctx context.Context, session *store.PartitionSession) {
	p.sessionPID.Store(session.PID())
	r := newRenewer(p)
	renewCtx, stopRenewing := context.WithCancel(ctx)
	renewing := make(chan struct{})
	go func() { defer close(renewing); r.run(renewCtx) }()
	defer func() { stopRenewing(); <-renewing }()
	ticker := time.NewTicker(p.conf.HeartbeatInterval)
	defer ticker.Stop()
	for {
		if p.beforeTick != nil {
			p.beforeTick()
		}
		if ctx.Err() != nil {
			p.releaseAll(session)
			return
		}
		if err := p.heartbeat(ctx, session, r); err != nil {
			p.endAll("lock_lost", err)
			session.Close()
			return
		}
		p.testSignals.partitionTick.Send(len(p.Held()))
		select {
		case <-ctx.Done():
		case <-ticker.C:
		case err := <-r.lost:
			p.endAll("lock_lost", err)
			session.Close()
			return
		}
	}
}

// heartbeat checks the lock session, forgets the terms the renewer found replaced, releases
// what finished draining, runs the elections and moves toward the share. An error means the
// lock session is gone, and with it every lock.
func (p *Partitions) heartbeat(ctx context.Context, session *store.PartitionSession, r *renewer) error {
	select {
	case err := <-r.lost:
		return err
	default:
	}
	pingCtx, cancel := context.WithTimeout(ctx, p.conf.LeaseTimeout)
	err := session.Ping(pingCtx)
	cancel()
	if err != nil && ctx.Err() == nil {
		return fmt.Errorf("the partition lock connection failed: %w", err)
	}
	if p.slowHeartbeat != nil {
		p.slowHeartbeat()
	}
	for _, f := range r.takeReplaced() {
		if h := p.held[f.Partition]; h != nil && h.term.Fence() == f {
			p.forget(f.Partition) // its lock is ours no more in any useful sense; the unlock is harmless
			_ = session.Unlock(ctx, f)
		}
	}
	p.unlockDrained(ctx, session)
	p.elect(ctx, session)
	if err := p.rebalance(ctx, session); err != nil && ctx.Err() == nil {
		p.log.Warn("reading the partitions failed; retrying at the next heartbeat", "error", err)
	}
	return nil
}

// endTerm ends a term, once. Given up ("released", "shutdown"), it stops starting runs, and
// its drain (Partitions.drain) stops those in flight later; lost, it stops both at once,
// even after it was given up.
func (p *Partitions) endTerm(partition int, h *heldPartition, why string, reason error) {
	if h.term.Ctx == nil {
		return
	}
	givenUp := why == "released" || why == "shutdown"
	if !givenUp {
		h.end.stopRuns()
	}
	if !h.ending.CompareAndSwap(false, true) {
		return
	}
	h.end.stopStarting()
	p.conf.Metrics.PartitionLost(why)
	level := slog.LevelWarn // lost: its runs were cut short
	if givenUp {
		level = slog.LevelInfo
	}
	p.log.Log(context.Background(), level, "partition term ended", "partition", partition, "epoch", h.term.Epoch,
		"why", why, "reason", reason)
	p.testSignals.partitionLost.Send(partition)
}

// endAll ends every term and its runs at once: the lock connection is gone, cannot be
// trusted or is closing, so the locks are (or will be) someone else's, and nothing waits
// for holds.
func (p *Partitions) endAll(why string, reason error) {
	for id, h := range p.held {
		p.endTerm(id, h, why, reason)
		if h.term.Ctx != nil {
			h.end.stopRuns()
		}
		p.forget(id)
	}
}

func (p *Partitions) forget(partition int) {
	p.mu.Lock()
	delete(p.held, partition)
	p.mu.Unlock()
	p.conf.Metrics.SetPartitionsHeld(len(p.held))
}
