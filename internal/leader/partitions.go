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
// connection, whose heartbeat renews every held term in one statement.

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
	Metrics      *metrics.Metrics // nil: none
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

	testSignals testSignals
	beforeTick  func()        // test hook: blocks the loop as a paused process would
	sessionPID  atomic.Uint32 // the lock session's backend, for tests that end it
}

// heldPartition is a partition whose lock this replica holds: elected (term set), waiting
// for its election (term.Ctx nil), or draining before the unlock.
type heldPartition struct {
	term     Term
	end      context.CancelFunc
	lockedAt time.Time
	drained  chan struct{} // non-nil while draining; closed once the holds are released
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
// heartbeat's deadline is the last success plus the lease, so a replica that cannot prove it
// still holds its locks ends every term within the lease of the last proof (fail closed).
func (p *Partitions) lead(ctx context.Context, session *store.PartitionSession) {
	p.sessionPID.Store(session.PID())
	lastOK := time.Now()
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
		start := time.Now()
		if err := p.renew(ctx, session, lastOK); err != nil {
			p.endAll("lock_lost", err)
			session.Close()
			return
		}
		lastOK = start
		p.unlockDrained(ctx, session)
		p.elect(ctx, session)
		if err := p.rebalance(ctx, session); err != nil && ctx.Err() == nil {
			p.log.Warn("reading the partitions failed; retrying at the next heartbeat", "error", err)
		}
		p.testSignals.partitionTick.Send(len(p.Held()))
		select {
		case <-ctx.Done():
		case <-ticker.C:
		}
	}
}

// renew renews every elected term in one statement; a term the statement did not renew was
// replaced by another replica's election and ends. An error ends them all.
func (p *Partitions) renew(ctx context.Context, session *store.PartitionSession, lastOK time.Time) error {
	var fences []store.Fence
	for _, h := range p.held {
		if h.term.Ctx != nil {
			fences = append(fences, h.term.Fence())
		}
	}
	if len(fences) == 0 {
		return nil
	}
	hbCtx, cancel := context.WithDeadline(context.WithoutCancel(ctx), lastOK.Add(p.conf.LeaseTimeout))
	renewed, err := session.Renew(hbCtx, fences)
	cancel()
	if err != nil {
		return fmt.Errorf("heartbeat on the partition lock connection failed: %w", err)
	}
	for _, f := range fences {
		if !renewed[f.Partition] {
			h := p.held[f.Partition]
			p.endTerm(f.Partition, h, "fenced", fmt.Errorf("partition %d has a new term: another replica was elected", f.Partition))
			p.forget(f.Partition) // its lock is ours no more in any useful sense; the unlock is harmless
			_ = session.Unlock(ctx, f)
		}
	}
	return nil
}

// endTerm cancels a term's context, once.
func (p *Partitions) endTerm(partition int, h *heldPartition, why string, reason error) {
	if h.term.Ctx == nil || h.term.Ctx.Err() != nil {
		return
	}
	h.end()
	p.conf.Metrics.PartitionLost(why)
	level := slog.LevelWarn // lost: its runs were cut short
	if why == "released" || why == "shutdown" {
		level = slog.LevelInfo
	}
	p.log.Log(context.Background(), level, "partition term ended", "partition", partition, "epoch", h.term.Epoch,
		"why", why, "reason", reason)
	p.testSignals.partitionLost.Send(partition)
}

// endAll ends every term at once: the lock connection is gone or cannot be trusted, so the
// locks are (or will be) someone else's, and nothing waits for holds.
func (p *Partitions) endAll(why string, reason error) {
	for id, h := range p.held {
		p.endTerm(id, h, why, reason)
		p.forget(id)
	}
}

func (p *Partitions) forget(partition int) {
	p.mu.Lock()
	delete(p.held, partition)
	p.mu.Unlock()
	p.conf.Metrics.SetPartitionsHeld(len(p.held))
}
