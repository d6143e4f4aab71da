package engine

import (
	"context"
	"slices"
	"sync"

	"github.com/schedulerhq/scheduler/internal/config"
	"github.com/schedulerhq/scheduler/internal/metrics"
)

// Gate bounds the run bodies a replica runs at once, every engine (one per partition it
// leads) together, so that a slot of 10 000 jobs costs at most limit goroutines, not 10 000
// with grown stacks. A claimed run that finds no place waits as a small value in its
// namespace's queue; it gets a goroutine only when a place frees, and the goroutine of a
// body that ends runs the next waiting one, so its grown stack serves again instead of a
// new goroutine growing its own. A body whose work is done and whose end only waits to be
// recorded gives its place up first (Go's release): the bound is on the work in flight
// (calls, statements), and a goroutine waiting for its batch's commit is small and brief.
//
// Fairness: the waiting runs are served round-robin across namespaces, and a namespace
// holds at most share places (half the limit) at once, even while no other namespace waits: a namespace
// whose target hangs holds its share until its runs time out, and the other namespaces
// always have the rest. The built-in jobs are a namespace of their own ("").
//
// A waiting run whose context ends (its term ended), or that leaves (its cancel was
// requested), leaves the queue at once and runs outside the bound: its body sees the end
// and does not begin (execution.execute), so it costs no place. The gate watches each
// context of waiting runs once, not once a run: a slot's runs share their term's context,
// and a watch a run (context.AfterFunc) held 6 MB of a replica's heap at a 100 000-job slot.
type Gate struct {
	limit, share int
	metrics      *metrics.Metrics

	mu      sync.Mutex
	running int
	inUse   map[string]int    // places held, by namespace
	queues  map[string]*queue // waiting runs, by namespace
	waiting int               // runs waiting, every namespace together
	// ring are the namespaces with waiting runs in the order they are served; next is the
	// one served first when a place frees.
	ring []string
	next int
	// watches are the contexts of the waiting runs, each watched for its end once.
	watches map[context.Context]*watch
}

// watch is one context's watch for its end, and how many waiting runs it serves.
type watch struct {
	bodies int
	stop   func() bool
}

// queue is one namespace's waiting runs, oldest first. A run whose context ended while it
// waited stays in bodies, no longer queued, until it reaches the front: taking it out of
// the middle would cost a scan per run, and a term's end abandons thousands at once.
type queue struct {
	bodies []*body
	live   int // the bodies still queued
}

// body is one run waiting for, or holding, a place.
type body struct {
	g      *Gate
	ns     string
	run    func()
	queued bool // in its namespace's queue (under Gate.mu)
	freed  bool // holds no place: released, or run outside the bound (under Gate.mu)
	// ctx is the context whose end takes the body out of its queue while it waits.
	ctx context.Context
}

// NewGate returns a gate of limit places (0: config.RunConcurrencyDefault), of which one
// namespace holds at most half (at least 1).
func NewGate(limit int, m *metrics.Metrics) *Gate {
	if limit <= 0 {
		limit = config.RunConcurrencyDefault
	}
	g := &Gate{limit: limit, share: max(limit/2, 1), metrics: m, inUse: map[string]int{}, queues: map[string]*queue{},
		watches: map[context.Context]*watch{}}
	g.metrics.RunBodies(0, 0, limit)
	return g
}

// Go runs run in a goroutine once a place of namespace ns is free: at once, or when a
// body ends. When ctx ends before then, run is called at once, outside the bound, and must
// see ctx ended and return without doing the run's work.
//
// run may call release once its work is done and only its bookkeeping is left (a run's
// end waiting for its batch to commit): the place goes to the next waiting body at once.
// Held until the end committed, a place cost a call's time plus the finisher's: with the
// database busy at a 100 000-job slot, most of each place's time, and the calls of a
// replica went out a few hundred a second.
//
// Go returns, for a body that waits, leave, which takes it out of the queue and calls run
// at once outside the bound, as ctx's end does (a run's cancel requested while it waits);
// nil for a body that got its place at once.
func (g *Gate) Go(ctx context.Context, ns string, run func(release func())) (leave func()) {
	b := &body{g: g, ns: ns}
	b.run = func() { run(b.release) }
	g.mu.Lock()
	if g.running < g.limit && g.inUse[ns] < g.share {
		g.admitLocked(b)
		g.mu.Unlock()
		go g.work(b)
		return nil
	}
	b.queued, b.ctx = true, ctx
	q := g.queues[ns]
	if q == nil {
		q = &queue{}
		g.queues[ns] = q
		g.ring = append(g.ring, ns)
	}
	q.bodies = append(q.bodies, b)
	q.live++
	g.waiting++
	g.observeLocked()
	g.watchLocked(ctx)
	g.mu.Unlock()
	return func() { g.abandon(b) }
}

// watchLocked counts one more waiting body whose context is ctx, and starts watching ctx
// for its end if none did.
func (g *Gate) watchLocked(ctx context.Context) {
	w := g.watches[ctx]
	if w == nil {
		w = &watch{}
		g.watches[ctx] = w
		// Registered under mu, so that no body of ctx is admitted before stop is set.
		w.stop = context.AfterFunc(ctx, func() { g.abandonAll(ctx) })
	}
	w.bodies++
}

// work runs b and, while waiting bodies may take the place b frees, the next one.
func (g *Gate) work(b *body) {
	for b != nil {
		b.run()
		b = g.free(b)
	}
}

// release gives b's place up before its run returns; the next waiting body starts in a
// goroutine of its own, since b's still has work.
func (b *body) release() {
	if next := b.g.free(b); next != nil {
		go b.g.work(next)
	}
}

// free gives b's place up, once, and returns the waiting body admitted to it, if any.
func (g *Gate) free(b *body) *body {
	g.mu.Lock()
	defer g.mu.Unlock()
	if b.freed {
		return nil
	}
	b.freed = true
	g.running--
	if g.inUse[b.ns]--; g.inUse[b.ns] == 0 {
		delete(g.inUse, b.ns)
	}
	next := g.pickLocked()
	if next == nil {
		g.observeLocked()
		return nil
	}
	g.admitLocked(next)
	return next
}

// pickLocked takes the next waiting body that may run, round-robin across namespaces;
// nil when the bound is reached or every waiting namespace holds its share.
func (g *Gate) pickLocked() *body {
	if g.running >= g.limit {
		return nil
	}
	for range len(g.ring) {
		if g.next >= len(g.ring) {
			g.next = 0
		}
		ns := g.ring[g.next]
		if g.inUse[ns] >= g.share {
			g.next++
			continue
		}
		q := g.queues[ns]
		b := q.pop()
		g.unqueueLocked(q, b)
		if g.queues[ns] != nil {
			g.next++ // else ns left the ring, and next is already the following one
		}
		return b
	}
	return nil
}

// pop takes the oldest body still queued; q.live is above 0.
func (q *queue) pop() *body {
	for {
		b := q.bodies[0]
		q.bodies[0] = nil // the array must not keep a run's closure alive
		q.bodies = q.bodies[1:]
		if b.queued {
			return b
		}
	}
}

// unqueueLocked counts b, of q, out of the waiting runs; a namespace left without any
// leaves the ring.
func (g *Gate) unqueueLocked(q *queue, b *body) {
	b.queued = false
	g.waiting--
	// Out of the queue, its context's end is the body's business now.
	w := g.watches[b.ctx]
	if w.bodies--; w.bodies == 0 {
		w.stop()
		delete(g.watches, b.ctx)
	}
	b.ctx = nil
	if q.live--; q.live > 0 {
		return
	}
	delete(g.queues, b.ns)
	i := slices.Index(g.ring, b.ns)
	g.ring = slices.Delete(g.ring, i, i+1)
	if i < g.next {
		g.next--
	}
}

func (g *Gate) admitLocked(b *body) {
	g.running++
	g.inUse[b.ns]++
	g.observeLocked()
}

// abandon takes b out of its queue when it left, and runs it outside the bound so that it
// records its end without waiting for a place.
func (g *Gate) abandon(b *body) {
	g.mu.Lock()
	if !b.queued {
		g.mu.Unlock()
		return
	}
	g.abandonLocked(b)
	g.observeLocked()
	g.mu.Unlock()
	b.run()
}

// abandonAll does what abandon does for every body that waits with ctx, which ended, each
// in a goroutine of its own. It reads every queue once: a context ends for all its bodies
// at once (a term's end), not one body at a time.
func (g *Gate) abandonAll(ctx context.Context) {
	g.mu.Lock()
	var left []*body
	for _, q := range g.queues {
		for _, b := range q.bodies {
			if b != nil && b.queued && b.ctx == ctx {
				left = append(left, b)
			}
		}
	}
	for _, b := range left {
		g.abandonLocked(b)
	}
	g.observeLocked()
	g.mu.Unlock()
	for _, b := range left {
		go b.run() // each records its end, which may wait for a batch
	}
}

func (g *Gate) abandonLocked(b *body) {
	g.unqueueLocked(g.queues[b.ns], b)
	b.freed = true // it never held a place
}

// observeLocked reports the gate's state to the metrics; g.mu is held, so the gauges
// follow the changes in their order.
func (g *Gate) observeLocked() { g.metrics.RunBodies(g.running, g.waiting, g.limit) }
