// Package leader elects one leader among the scheduler's replicas: a session-level
// PostgreSQL advisory lock held on a dedicated connection, a fencing epoch bumped by every
// election, a heartbeat that makes a leader step down within the lease when it loses its
// connection, and the instance heartbeats behind GET /v1/instances.
//
// Modelled on River's internal/leadership elector, with one difference on purpose:
// followers wait for the lock inside PostgreSQL (pg_advisory_lock, in statements of at most
// a second: store.LockSession.Lock), so a released or dropped lock is taken over at once
// instead of after a lease and a poll.
package leader

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/schedulerhq/scheduler/internal/backoff"
	"github.com/schedulerhq/scheduler/internal/config"
	"github.com/schedulerhq/scheduler/internal/metrics"
	"github.com/schedulerhq/scheduler/internal/pglisten"
	"github.com/schedulerhq/scheduler/internal/store"
)

const (
	// instanceHeartbeatDefault is how often every replica refreshes its scheduler_instances row.
	instanceHeartbeatDefault = 2 * time.Second
	// staleInstanceFactor: the leader deletes rows not refreshed for this many heartbeats.
	staleInstanceFactor = 10
	// reconnectMin and reconnectMax bound the backoff between attempts to reach a database
	// that is down: the first retries are quick (a dropped connection usually comes back at
	// once), a long outage is retried every couple of seconds.
	reconnectMin = 250 * time.Millisecond
	reconnectMax = 2 * time.Second
	// resignTimeout bounds giving up leadership during a shutdown.
	resignTimeout = 2 * time.Second
	// drainTimeoutDefault is how long a resignation waits for its term's runs to record
	// what they did, when the caller does not say (the replica passes jobs.HandOverDrain).
	drainTimeoutDefault = 15 * time.Second
	// runGraceDefault is how long a term given up lets a runtime job's call in flight finish:
	// most calls take less, and meanwhile nothing of the term's partition is claimed.
	runGraceDefault = 2 * time.Second
	// subscriberBuffer holds terms for a subscriber that is busy; see Subscription.
	subscriberBuffer = 16
	// pollIntervalDefault is config's SCHEDULER_POLL_INTERVAL default, for a Config without it.
	pollIntervalDefault = config.PollIntervalDefault
)

// Config configures an Elector.
type Config struct {
	DB         *store.DB
	Notifier   *pglisten.Notifier // wakes the leader for step-down requests
	InstanceID string
	Log        *slog.Logger
	// LeaseTimeout bounds how long a leader may go without a successful heartbeat before it
	// steps down, and how long a new leader waits for the old one's transactions before
	// terminating them. Required (config's SCHEDULER_LEASE_TIMEOUT).
	LeaseTimeout time.Duration
	// HeartbeatInterval is how often the leader checks its lock connection. Default lease/5.
	HeartbeatInterval time.Duration
	// InstanceHeartbeat is how often this replica refreshes its scheduler_instances row.
	InstanceHeartbeat time.Duration
	// Host, Version and HTTPAddr describe this replica in scheduler_instances.
	Host, Version, HTTPAddr string
	// Metrics, when set, counts elections and step-downs.
	Metrics *metrics.Metrics
	// DrainTimeout bounds how long a voluntary resignation waits for the work its term holds
	// (Term.Hold) before releasing the lock. Default drainTimeoutDefault.
	DrainTimeout time.Duration
	// RunGrace is how long, within DrainTimeout, a term given up lets the runs in flight
	// that outlive its Ctx (Term.RunsCtx) go on. Default runGraceDefault.
	RunGrace time.Duration
	// PollInterval is how often this replica ends other logins' backends that hold or await
	// the election's lock (guard.go). Default pollIntervalDefault (config's
	// SCHEDULER_POLL_INTERVAL).
	PollInterval time.Duration
}

func (c *Config) withDefaults() (*Config, error) {
	out := *c
	if out.DB == nil || out.Notifier == nil {
		return nil, errors.New("leader: Config.DB and Config.Notifier are required")
	}
	if out.InstanceID == "" {
		return nil, errors.New("leader: Config.InstanceID is required")
	}
	if out.Log == nil {
		out.Log = slog.Default()
	}
	if out.LeaseTimeout <= 0 {
		return nil, fmt.Errorf("leader: Config.LeaseTimeout %s must be above 0", out.LeaseTimeout)
	}
	if out.HeartbeatInterval <= 0 {
		out.HeartbeatInterval = out.LeaseTimeout / 5
	}
	if out.HeartbeatInterval >= out.LeaseTimeout {
		return nil, fmt.Errorf("leader: HeartbeatInterval %s must be shorter than LeaseTimeout %s", out.HeartbeatInterval, out.LeaseTimeout)
	}
	if out.InstanceHeartbeat <= 0 {
		out.InstanceHeartbeat = instanceHeartbeatDefault
	}
	if out.DrainTimeout <= 0 {
		out.DrainTimeout = drainTimeoutDefault
	}
	if out.RunGrace <= 0 {
		out.RunGrace = runGraceDefault
	}
	if out.PollInterval <= 0 {
		out.PollInterval = pollIntervalDefault
	}
	return &out, nil
}

// Subscription delivers this replica's terms, in order.
type Subscription struct {
	ch chan Term
}

// C returns the channel of terms. A term whose Ctx is already done by the time it is read
// ended before the subscriber got to it.
func (s *Subscription) C() <-chan Term { return s.ch }

// Elector runs this replica's side of the election.
type Elector struct {
	conf *Config
	log  *slog.Logger

	mu       sync.Mutex
	subs     []*Subscription
	isLeader bool
	epoch    int64
	term     Term // the current term while isLeader

	started           time.Time
	leadershipChanged chan struct{} // wakes the instance heartbeat

	// Touched only by Run's goroutine: when this replica last took the leader lock, and when
	// it last stepped down (for the hand-over to its own next term).
	lockedAt      time.Time
	steppedDownAt time.Time
	// seen is the newest leader row this replica knows of (its own terms and the rows it
	// found when elected): a row found older than it was rolled back by a failover.
	seen    store.LeaderRow
	control control

	// drained is closed once an operator drained this replica (drain.go).
	drained     chan struct{}
	drainedOnce sync.Once

	testSignals     testSignals
	beforeHeartbeat func() // test hook: blocks the leader's loop as a paused process would
}

// New checks conf and returns an elector; Run starts it.
func New(conf Config) (*Elector, error) {
	c, err := conf.withDefaults()
	if err != nil {
		return nil, err
	}
	if c.Host == "" {
		c.Host, _ = os.Hostname()
	}
	return &Elector{
		conf:              c,
		log:               c.Log.With("instance_id", c.InstanceID),
		started:           time.Now(),
		leadershipChanged: make(chan struct{}, 1),
		control:           control{wake: make(chan struct{}, 1)},
		drained:           make(chan struct{}),
	}, nil
}

// Listen subscribes to this replica's terms. A subscriber that arrives during a term gets
// that term at once, so a late subscriber (an engine started after the election) cannot
// miss the term it joined in; setLeader's snapshot of the subscribers is taken under the
// same lock, so no term is delivered twice.
func (e *Elector) Listen() *Subscription {
	e.mu.Lock()
	defer e.mu.Unlock()
	s := &Subscription{ch: make(chan Term, subscriberBuffer)}
	e.subs = append(e.subs, s)
	if e.isLeader && e.term.Ctx.Err() == nil {
		s.ch <- e.term
	}
	return s
}

// IsLeader reports whether this replica leads now, and under which epoch.
func (e *Elector) IsLeader() (bool, int64) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.isLeader, e.epoch
}

// Run takes part in elections until ctx is cancelled. It then resigns leadership at once
// (with its own bounded context) and returns.
func (e *Elector) Run(ctx context.Context) {
	// The instance row outlives the resignation, which marks it a follower before releasing
	// the lock: so the next leader reads a resigned leader, never a missing row or a leader
	// whose last heartbeat is seconds old (see handover).
	hbCtx, stopHeartbeat := context.WithCancel(context.WithoutCancel(ctx))
	var wg sync.WaitGroup
	wg.Add(3)
	go func() {
		defer wg.Done()
		e.instanceHeartbeatLoop(hbCtx)
	}()
	go func() {
		defer wg.Done()
		e.guardElectionLoop(ctx)
	}()
	go func() {
		defer wg.Done()
		e.watchLeaderRenewalsLoop(ctx)
	}()
	defer wg.Wait()
	defer stopHeartbeat()
	defer e.conf.Notifier.Listen(store.StepDownChannel, e.notified)()

	// A drained replica stops waiting for the lock, and takes part no more until it restarts.
	electCtx, stopElecting := context.WithCancel(ctx)
	defer stopElecting()
	go func() {
		select {
		case <-e.drained:
			stopElecting()
		case <-electCtx.Done():
		}
	}()
	for electCtx.Err() == nil {
		var session *store.LockSession
		var term Term
		var end ending
		var failed string // what the last attempt failed at
		err := backoff.Retry(electCtx, reconnectMin, reconnectMax, func() (err error) {
			if session, err = e.conf.DB.OpenLockSession(electCtx); err != nil {
				failed = "cannot reach PostgreSQL for the leader lock; retrying"
				return err
			}
			if term, end, err = e.attemptGainLeadership(electCtx, session); err != nil {
				e.control.disarm()
				session.Close()
				failed = "election attempt failed; reconnecting"
			}
			return err
		}, func(err error, d time.Duration) error {
			e.log.Warn(failed, "error", err, "retry_in", d)
			return nil
		})
		if err != nil {
			break // ctx ended, or the replica was drained
		}
		e.keepLeadershipLoop(ctx, session, term, end)
	}
	<-ctx.Done() // a drained replica still heartbeats its instance row and guards the locks
}

// attemptGainLeadership waits inside PostgreSQL for the leader lock, then bumps the epoch.
func (e *Elector) attemptGainLeadership(ctx context.Context, session *store.LockSession) (Term, ending, error) {
	waitStart := time.Now()
	if err := session.Lock(ctx); err != nil {
		return Term{}, ending{}, fmt.Errorf("wait for the leader lock: %w", err)
	}
	lockedAt := time.Now()
	e.testSignals.lockAcquired.Send(struct{}{})
	// Before the bump, so a step-down request naming the new epoch cannot come too early.
	e.control.arm()
	taken, err := session.LockTaken(ctx)
	if err != nil {
		return Term{}, ending{}, err
	}
	// The follower's wait in pg_advisory_lock is unbounded by design and says nothing; the
	// bump's wait for the old epoch's fenced transactions is the hand-over's lock cost.
	bumpStart := time.Now()
	old, cur, terminated, err := session.BumpEpoch(ctx, e.conf.InstanceID, e.conf.LeaseTimeout)
	for _, b := range terminated {
		e.log.Warn("terminated a backend that held up the epoch bump beyond the lease",
			backendAttrs(b, "old_leader", old.InstanceID, "old_epoch", old.Epoch)...)
	}
	if errors.Is(err, store.ErrCannotTerminate) {
		// Not a passing fault: no replica can lead until an operator grants the right.
		e.log.Error("cannot end what holds up the epoch bump; no leader until it ends", "error", err)
	}
	if err != nil {
		return Term{}, ending{}, err
	}
	bumpWait := time.Since(bumpStart)
	e.conf.Metrics.LockAcquired("leader_row", bumpWait)
	e.lockedAt = lockedAt
	failedOver := failedOver(e.seen, old, cur)
	e.seen = cur
	handover := e.handover(old, cur, taken)
	e.log.Info("lock acquired", "lock", "scheduler-leader", "key", taken.Key, "epoch", cur.Epoch,
		"waited", lockedAt.Sub(waitStart), "leader_row_wait", bumpWait)
	e.log.Info("elected leader", "epoch", cur.Epoch, "term_id", cur.TermID, "old_epoch", old.Epoch,
		"old_leader", old.InstanceID, "since", cur.Since, "handover", handover)
	if handover < 0 {
		e.conf.Metrics.Elected(-1)
	} else {
		e.conf.Metrics.Elected(handover.Seconds())
	}
	e.conf.Metrics.SetLeader(true, cur.Epoch)
	term, end := begin(ctx, Term{Epoch: cur.Epoch, TermID: cur.TermID, Since: cur.Since, FailedOver: failedOver})
	return term, end, nil
}

// keepLeadershipLoop heartbeats the lock connection until leadership ends. A leader that
// cannot prove within the lease that it still holds its lock steps down (docs/design.md
// guarantee 6): the heartbeat's deadline is the last success plus the lease, so jobs are
// cancelled within the lease of the moment the connection was last known good.
func (e *Elector) keepLeadershipLoop(ctx context.Context, session *store.LockSession, term Term, end ending) {
	e.control.begin(term.Epoch)
	defer e.control.disarm()
	e.setLeader(true, term)
	lastOK := time.Now()
	for {
		if e.beforeHeartbeat != nil {
			e.beforeHeartbeat()
		}
		// Between heartbeats, wait for an operator's step-down request (see notified).
		wctx, cancel := context.WithTimeout(ctx, e.conf.HeartbeatInterval)
		asked, err := e.awaitStepDown(ctx, wctx, session, term.Epoch)
		cancel()
		switch {
		case ctx.Err() != nil:
			e.attemptResign(session, term, end, "shutdown")
			return
		case e.isDrained():
			e.attemptResign(session, term, end, "drain")
			return
		case len(asked) > 0:
			for _, m := range asked {
				e.log.Info("step-down requested", "epoch", term.Epoch, "control_id", m.ID, "token_kind", m.TokenKind,
					"reason", m.Reason, "request_id", m.RequestID, "requested_at", m.CreatedAt)
			}
			// Back to Run's loop: this replica rejoins the election as a follower, behind
			// the replicas already waiting for the lock, one of which takes over at once.
			e.attemptResign(session, term, end, "step_down")
			return
		case err != nil:
			e.stepDown(session, term, end, "lock_lost", fmt.Errorf("reading step-down requests on the lock connection failed: %w", err))
			return
		}
		start := time.Now()
		hbCtx, cancel := context.WithDeadline(ctx, lastOK.Add(e.conf.LeaseTimeout))
		cur, err := session.Renew(hbCtx, term.Fence(), e.conf.HeartbeatInterval)
		cancel()
		switch {
		case ctx.Err() != nil:
			e.attemptResign(session, term, end, "shutdown")
			return
		case err != nil:
			e.stepDown(session, term, end, "lock_lost", fmt.Errorf("heartbeat on the lock connection failed: %w", err))
			return
		case cur != term.Fence():
			e.stepDown(session, term, end, "fenced", fmt.Errorf("the term is now %s: another replica was elected", cur))
			return
		}
		// The server answered after start, so the lock was still held at start.
		lastOK = start
		e.testSignals.heartbeat.Send(term.Epoch)
	}
}

// stepDown ends a term that can no longer be trusted: jobs first, then the connection.
func (e *Elector) stepDown(session *store.LockSession, term Term, end ending, kind string, reason error) {
	end.lost()
	e.setLeader(false, term)
	e.conf.Metrics.SteppedDown(kind)
	e.steppedDownAt = time.Now()
	e.log.Warn("stepped down: stopped scheduling and cancelled running jobs", "epoch", term.Epoch, "reason", reason)
	session.Close()
	e.log.Info("lock released", "lock", "scheduler-leader", "epoch", term.Epoch, "held", time.Since(e.lockedAt),
		"how", "closed the lock connection")
	e.testSignals.lostLeadership.Send(term.Epoch)
}

// attemptResign gives leadership up on shutdown or an operator's step-down, so a follower
// takes over at once (docs/design.md guarantee 7). It uses a fresh bounded context because we
// want to give up leadership even during a shutdown, when ctx is already cancelled; closing
// the connection releases the lock too if the unlock fails.
func (e *Elector) attemptResign(session *store.LockSession, term Term, end ending, kind string) {
	end.stopStarting()
	e.setLeader(false, term)
	e.conf.Metrics.SteppedDown(kind)
	// Still holding the lock, so nobody can bump the epoch: the runs in flight get the
	// grace to finish (the term's RunsCtx lasts), and what they did, the outcomes of the messages they sent
	// included, commits under its fence. Unlocked at once, the next leader's bump would
	// refuse those writes, and a delivered message would stay PENDING and be sent again.
	drainStart := time.Now()
	if !term.drain(end, e.conf.RunGrace, e.conf.DrainTimeout) {
		e.log.Warn("runs still recording at the drain timeout; releasing the lock anyway, the next leader settles them",
			"epoch", term.Epoch, "drain_timeout", e.conf.DrainTimeout)
	} else {
		e.log.Info("the term's runs recorded what they did; releasing the lock", "epoch", term.Epoch,
			"drained_in", time.Since(drainStart))
	}
	e.steppedDownAt = time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), resignTimeout)
	defer cancel()
	// Marked a follower before the lock goes, so the next leader measures the hand-over
	// from the release rather than from this row's last periodic heartbeat.
	if _, err := e.conf.DB.HeartbeatInstance(ctx, e.instance(false)); err != nil {
		e.log.Warn("marking this instance a follower failed; the next leader's hand-over figure may be high", "error", err)
	}
	if err := session.Unlock(ctx); err != nil {
		e.log.Warn("releasing the leader lock failed; closing its connection releases it", "epoch", term.Epoch, "error", err)
	}
	session.Close()
	e.log.Info("lock released", "lock", "scheduler-leader", "epoch", term.Epoch, "held", time.Since(e.lockedAt),
		"how", "resigned")
	e.log.Info("resigned leadership", "epoch", term.Epoch, "why", kind)
	e.testSignals.lostLeadership.Send(term.Epoch)
}

func (e *Elector) setLeader(isLeader bool, term Term) {
	e.mu.Lock()
	e.isLeader = isLeader
	e.epoch = term.Epoch
	e.term = Term{}
	var subs []*Subscription
	if isLeader {
		e.term = term
		subs = append(subs, e.subs...)
	}
	e.mu.Unlock()
	for _, s := range subs {
		select {
		case s.ch <- term:
		default:
			// The subscriber has not read its last 16 terms; it would be acting on ended terms anyway.
			e.log.Error("a leadership subscriber is not reading its terms; dropped one", "epoch", term.Epoch)
		}
	}
	select {
	case e.leadershipChanged <- struct{}{}:
	default:
	}
	if isLeader {
		e.testSignals.gainedLeadership.Send(term.Epoch)
	}
}
