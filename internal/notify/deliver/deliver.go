// Package deliver is the leader's half of the jobs' notifications (docs/design.md,
// "Notifications to teams"): it gathers the events the engine recorded into messages, one
// per job, event type and destination per coalescing interval, and sends each at least once.
//
// Both halves of that are rows. Grouping marks the events and inserts their messages in one
// fenced transaction, so an event is listed in one message per destination, never two. A
// message's body and webhook-id are fixed when it is made, and it stays pending until a
// fenced transaction records the receiver's 2xx: a leader that dies between the two leaves
// it pending, and the next one sends the same bytes under the same webhook-id, which a
// receiver that deduplicates sees once.
//
// Messages go through their own guarded caller (internal/targets), never to an address the
// operator did not allow, one attempt at a time with a timeout and a bounded read of the
// answer; a failed attempt is retried with backoff by a later pass, so a slow or hostile
// receiver holds one goroutine for one attempt and never the leader or other jobs' messages.
package deliver

import (
	"context"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/schedulerhq/scheduler/internal/metrics"
	"github.com/schedulerhq/scheduler/internal/notify"
	"github.com/schedulerhq/scheduler/internal/store"
	"github.com/schedulerhq/scheduler/internal/targets"
)

// Tuning of the delivery. Constants rather than settings: they bound what a receiver can
// cost the leader, which is not the receiver's owner's to raise.
const (
	// pollEvery is how often the leader looks for events whose interval is over and for
	// messages due.
	pollEvery = time.Second
	// concurrencyDefault bounds the messages in flight at once; each job has at most one.
	concurrencyDefault = 16
	// AttemptTimeout bounds one attempt, connecting and reading the answer included.
	AttemptTimeout = 10 * time.Second
	// maxAttempts bounds a message's attempts; spaced by retryMin doubling up to retryMax,
	// they cover about forty minutes of a receiver being down.
	maxAttempts = 12
	retryMin    = 2 * time.Second
	retryMax    = 10 * time.Minute
	// recordTimeout bounds recording an attempt's outcome.
	recordTimeout = 10 * time.Second
	// maxGroupsPerPass bounds the (job, event) groups one pass makes messages of.
	maxGroupsPerPass = 200
)

// SecretFunc returns the value of the secret name as the job's namespace sees it. It is the
// one place notifications read secrets, so that the secrets' store can change under it.
type SecretFunc func(ctx context.Context, namespace, name string) (value string, allowedHosts []string, err error)

// Rules returns a job's notification rules as the leader runs it; false for a job it does
// not know (deleted since its events were recorded).
type Rules func(job string) ([]notify.Rule, bool)

// Config is what a Service is built from.
type Config struct {
	DB *store.DB
	// Caller sends the messages: a caller of their own, sharing the jobs' guard, so that
	// notifications and the jobs' calls never wait for each other's concurrency slots.
	Caller *targets.Caller
	Secret SecretFunc
	// Guard is the outbound guard of a namespace's messages (internal/outbound): a job's
	// webhook reaches a private address only where its namespace's http_allow allows it.
	// Nil: the caller's guard.
	Guard func(ctx context.Context, namespace string) (*targets.Guard, error)
	// Interval coalesces a storm: the events of one job and type are gathered for this long
	// (config's SCHEDULER_NOTIFY_INTERVAL; 0: its default).
	Interval time.Duration
	// PublicURL starts each message's console_url (config's SCHEDULER_PUBLIC_URL).
	PublicURL string
	Metrics   *metrics.Metrics
	// Concurrency bounds the messages in flight (0: 16).
	Concurrency int
	// AttemptTimeout bounds one attempt (0: AttemptTimeout); tests shorten it.
	AttemptTimeout time.Duration
}

// Service sends the jobs' notifications while its replica leads (Lead, once per term).
type Service struct {
	c Config
}

// New builds a Service; it touches nothing until Lead.
func New(c Config) *Service {
	if c.Interval <= 0 {
		c.Interval = time.Minute
	}
	if c.Concurrency <= 0 {
		c.Concurrency = concurrencyDefault
	}
	if c.AttemptTimeout <= 0 {
		c.AttemptTimeout = AttemptTimeout
	}
	return &Service{c: c}
}

// Lead groups and sends notifications until ctx (the term's) ends, then waits for the
// attempts in flight, which ctx cancels: a message whose outcome was not recorded stays
// pending for the next leader.
func (s *Service) Lead(ctx context.Context, fence store.Fence, log *slog.Logger, rules Rules) {
	log = log.With("component", "notifications")
	t := &term{s: s, fence: fence, log: log, rules: rules, busy: map[string]bool{}, done: make(chan struct{}, 1)}
	defer t.wg.Wait()
	ticker := time.NewTicker(pollEvery)
	defer ticker.Stop()
	for {
		t.group(ctx)
		t.dispatch(ctx)
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		case <-t.done: // a slot came free: a message waiting behind it may go now
		}
	}
}

// term is one term's sending state.
type term struct {
	s     *Service
	fence store.Fence
	log   *slog.Logger
	rules Rules
	wg    sync.WaitGroup
	done  chan struct{}

	mu   sync.Mutex
	busy map[string]bool // jobs with a message in flight: one at a time each, in order
}

// dispatch starts an attempt of every due message of a job without one in flight, up to the
// concurrency bound.
func (t *term) dispatch(ctx context.Context) {
	t.mu.Lock()
	free := t.s.c.Concurrency - len(t.busy)
	busy := make([]string, 0, len(t.busy))
	for job := range t.busy {
		busy = append(busy, job)
	}
	t.mu.Unlock()
	if free <= 0 || ctx.Err() != nil {
		return
	}
	due, err := t.s.c.DB.DueDeliveries(ctx, free*4, busy)
	if err != nil {
		if ctx.Err() == nil {
			t.log.Warn("reading the notifications due failed; the next pass retries", "error", err)
		}
		return
	}
	for _, d := range due {
		t.mu.Lock()
		if t.busy[d.Job] || len(t.busy) >= t.s.c.Concurrency {
			t.mu.Unlock()
			continue
		}
		t.busy[d.Job] = true
		t.mu.Unlock()
		t.wg.Add(1)
		go func() {
			defer t.wg.Done()
			defer t.release(d.Job)
			t.send(ctx, d)
		}()
	}
}

func (t *term) release(job string) {
	t.mu.Lock()
	delete(t.busy, job)
	t.mu.Unlock()
	select {
	case t.done <- struct{}{}:
	default:
	}
}

// retryIn is the wait before attempt n+1 of a message, after n failed ones.
func retryIn(n int) time.Duration {
	d := retryMin
	for i := 1; i < n && d < retryMax; i++ {
		d *= 2
	}
	return min(d, retryMax)
}

// wanted are the rules of rules that want event.
func wanted(rules []notify.Rule, event string) []notify.Rule {
	return slices.DeleteFunc(slices.Clone(rules), func(r notify.Rule) bool { return !r.Wants(event) })
}
