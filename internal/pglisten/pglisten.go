// Package pglisten is the replica's one listening connection to PostgreSQL. Every part of
// the replica that wants wake-ups (the engine's queue and definition watch, the API's ?wait
// requests, the elector's step-down) subscribes to a channel by function; the notifier
// listens on the channels that have subscribers, and reconnects and listens again in one
// place, with backoff, telling every subscriber to re-read what it may have missed.
//
// Modelled on River's internal/pglisten. Any login may NOTIFY any channel, so an event is
// only a wake-up: subscribers re-read the rows they care about and use a payload at most to
// choose what to read, never as a fact.
package pglisten

import (
	"context"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/schedulerhq/scheduler/internal/backoff"
	"github.com/schedulerhq/scheduler/internal/store"
)

const (
	// reconnectMin and reconnectMax bound the backoff between attempts to open the
	// connection again; subscribers poll meanwhile, so it need not be faster.
	reconnectMin = 100 * time.Millisecond
	reconnectMax = 2 * time.Second
)

// Event is what a subscriber is told.
type Event struct {
	// Payload is the notification's payload; "" for a Resync.
	Payload string
	// Resync says notifications may have been missed: the subscription's channel was not
	// listened on until now (the subscription is new, or the connection was lost and is
	// back). Re-read everything the channel would have announced.
	Resync bool
}

// Func receives a subscription's events, on the notifier's goroutine: it must not block
// (count, mark, or send without blocking, and do the reading elsewhere).
type Func func(Event)

// Notifier holds the replica's listening connection.
type Notifier struct {
	db  *store.DB
	log *slog.Logger

	mu   sync.Mutex
	subs map[string][]*subscription // by channel
	// dirty says subs changed since the connection's loop last listened accordingly.
	dirty bool
	// interrupt ends the loop's wait for a notification, so it listens on a new channel;
	// nil while it does not wait.
	interrupt context.CancelFunc
}

type subscription struct {
	channel string
	fn      Func
	// session is the connection that last told it to resync (0: none yet); touched under mu.
	session int
}

// New returns a notifier on db; Run connects it.
func New(db *store.DB, log *slog.Logger) *Notifier {
	if log == nil {
		log = slog.Default()
	}
	return &Notifier{db: db, log: log, subs: map[string][]*subscription{}}
}

// Listen subscribes fn to channel until unlisten is called. fn first receives a Resync once
// the channel is listened on (at once when it already is), then the channel's
// notifications, and a Resync again after every reconnection. After unlisten returns, fn
// may still receive the one event being delivered at that moment, and no later one.
func (n *Notifier) Listen(channel string, fn Func) (unlisten func()) {
	sub := &subscription{channel: channel, fn: fn}
	n.mu.Lock()
	n.subs[channel] = append(n.subs[channel], sub)
	n.changed()
	n.mu.Unlock()
	return func() {
		n.mu.Lock()
		defer n.mu.Unlock()
		n.subs[channel] = slices.DeleteFunc(n.subs[channel], func(s *subscription) bool { return s == sub })
		if len(n.subs[channel]) == 0 {
			delete(n.subs, channel)
		}
		n.changed()
	}
}

// changed makes the loop listen anew; called under mu.
func (n *Notifier) changed() {
	n.dirty = true
	if n.interrupt != nil {
		n.interrupt()
	}
}

// Run keeps the connection until ctx ends, reconnecting with backoff.
func (n *Notifier) Run(ctx context.Context) {
	retry := backoff.New(reconnectMin, reconnectMax)
	for session := 1; ctx.Err() == nil; session++ {
		err := n.session(ctx, session, retry)
		if ctx.Err() != nil {
			return
		}
		d := retry.Next()
		n.log.Warn("the notification connection failed; its subscribers poll until it is back",
			"error", err, "retry_in", d)
		backoff.Sleep(ctx, d)
	}
}

// session listens on one connection until it fails or ctx ends.
func (n *Notifier) session(ctx context.Context, id int, retry *backoff.Backoff) error {
	s, err := n.db.OpenListenSession(ctx)
	if err != nil {
		return err
	}
	defer s.Close()
	listened := map[string]bool{}
	for ctx.Err() == nil {
		if err := n.sync(ctx, s, id, listened); err != nil {
			return err
		}
		retry.Reset()
		wait, cancel := context.WithCancel(ctx)
		n.mu.Lock()
		if n.dirty {
			n.mu.Unlock()
			cancel()
			continue
		}
		n.interrupt = cancel
		n.mu.Unlock()
		channel, payload, ok, err := s.Wait(wait)
		n.mu.Lock()
		n.interrupt = nil
		n.mu.Unlock()
		cancel()
		switch {
		case err != nil:
			return err
		case ok:
			n.dispatch(channel, payload)
		}
	}
	return ctx.Err()
}

// sync listens on the channels that have subscribers and on no other, then tells the
// subscriptions this connection has not told yet to resync.
func (n *Notifier) sync(ctx context.Context, s *store.ListenSession, id int, listened map[string]bool) error {
	n.mu.Lock()
	n.dirty = false
	want := make(map[string]bool, len(n.subs))
	for channel := range n.subs {
		want[channel] = true
	}
	n.mu.Unlock()
	for channel := range want {
		if !listened[channel] {
			if err := s.Listen(ctx, channel, true); err != nil {
				return err
			}
			listened[channel] = true
		}
	}
	for channel := range listened {
		if !want[channel] {
			if err := s.Listen(ctx, channel, false); err != nil {
				return err
			}
			delete(listened, channel)
		}
	}
	var due []*subscription
	n.mu.Lock()
	for channel, subs := range n.subs {
		for _, sub := range subs {
			if listened[channel] && sub.session != id {
				sub.session = id
				due = append(due, sub)
			}
		}
	}
	n.mu.Unlock()
	for _, sub := range due {
		sub.fn(Event{Resync: true})
	}
	return nil
}

// dispatch hands a notification to its channel's subscribers.
func (n *Notifier) dispatch(channel, payload string) {
	n.mu.Lock()
	subs := slices.Clone(n.subs[channel])
	n.mu.Unlock()
	for _, sub := range subs {
		sub.fn(Event{Payload: payload})
	}
}

// Wake returns a Func that sends on ch without blocking: with ch's buffer of one, a burst of
// events is one wake-up.
func Wake(ch chan<- struct{}) Func {
	return func(Event) {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}
