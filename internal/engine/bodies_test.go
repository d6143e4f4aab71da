package engine

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// awaitClosed waits for ch to close, failing the test after waitTimeout.
func awaitClosed(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(waitTimeout):
		t.Fatalf("timed out waiting for %s", what)
	}
}

// The attack: one namespace's runs hang (a target that never answers) and keep coming. It
// holds at most its share of the gate; the other namespaces' runs, due after it filled
// that share, all run.
func TestGateHoldsANamespaceToItsShare(t *testing.T) {
	g := NewGate(8, nil)
	require.Equal(t, 4, g.share)
	hang := make(chan struct{})
	t.Cleanup(func() { close(hang) })
	var holding, most atomic.Int64
	slowStarted := make(chan struct{}, 12)
	for range 12 {
		g.Go(context.Background(), "slow", func(func()) {
			n := holding.Add(1)
			for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
			}
			slowStarted <- struct{}{}
			<-hang
			holding.Add(-1)
		})
	}
	for range 4 {
		<-slowStarted
	}
	var others sync.WaitGroup
	for i := range 40 {
		others.Add(1)
		g.Go(context.Background(), fmt.Sprint("team-", i%2), func(func()) { others.Done() })
	}
	done := make(chan struct{})
	go func() { others.Wait(); close(done) }()
	awaitClosed(t, done, "the other namespaces' runs")
	assert.Equal(t, int64(4), most.Load(), "the hanging namespace held its share, no more")
	assert.Len(t, slowStarted, 0, "no fifth run of the hanging namespace began")
}

// Waiting runs are served round-robin across namespaces, each namespace's oldest first.
func TestGateServesWaitingNamespacesRoundRobin(t *testing.T) {
	g := NewGate(1, nil)
	release := make(chan struct{})
	started := make(chan struct{})
	g.Go(context.Background(), "x", func(func()) { close(started); <-release })
	<-started
	var mu sync.Mutex
	var order []string
	var all sync.WaitGroup
	for _, name := range []string{"a1", "a2", "a3", "b1", "b2", "c1"} {
		all.Add(1)
		g.Go(context.Background(), name[:1], func(func()) {
			defer all.Done()
			mu.Lock()
			defer mu.Unlock()
			order = append(order, name)
		})
	}
	close(release)
	done := make(chan struct{})
	go func() { all.Wait(); close(done) }()
	awaitClosed(t, done, "the waiting runs")
	assert.Equal(t, []string{"a1", "b1", "c1", "a2", "b2", "a3"}, order)
}

// A waiting run whose context ends (its term ended, its cancel was requested) is called at
// once, outside the bound, to record its end; the runs behind it keep their order, and the
// place it never took stays the next run's.
func TestGateCallsAWaitingRunAtOnceWhenItsContextEnds(t *testing.T) {
	g := NewGate(1, nil)
	release := make(chan struct{})
	started := make(chan struct{})
	g.Go(context.Background(), "x", func(func()) { close(started); <-release })
	<-started
	ctx, cancel := context.WithCancel(context.Background())
	abandoned := make(chan struct{})
	g.Go(ctx, "a", func(func()) {
		assert.Error(t, ctx.Err(), "called only once its context ended")
		close(abandoned)
	})
	next := make(chan struct{})
	g.Go(context.Background(), "a", func(func()) { close(next) })
	cancel()
	awaitClosed(t, abandoned, "the abandoned run")
	select {
	case <-next:
		t.Fatal("the run behind it began while the place was still held")
	default:
	}
	close(release)
	awaitClosed(t, next, "the run behind the abandoned one")
}

// Many claimers submit at once, across namespaces, while some runs' contexts end as they
// wait and half the runs give their place up before they return: every run is called
// exactly once, the bound and each namespace's share hold at every moment, and the gate
// ends empty.
func TestGateUnderConcurrentSubmitsAndCancels(t *testing.T) {
	const limit, submitters, each = 6, 16, 200
	g := NewGate(limit, nil)
	var total atomic.Int64
	var byNS [4]atomic.Int64
	var calls [submitters * each]atomic.Int32
	var all sync.WaitGroup
	for s := range submitters {
		all.Go(func() {
			for i := range each {
				id, ns := s*each+i, (s+i)%len(byNS)
				ctx, cancel := context.WithCancel(context.Background())
				all.Add(1)
				g.Go(ctx, fmt.Sprint("ns-", ns), func(release func()) {
					defer all.Done()
					calls[id].Add(1)
					if ctx.Err() != nil {
						release() // abandoned: holds no place, so this frees none
						return    // and, called outside the bound, it does no work
					}
					assert.LessOrEqual(t, total.Add(1), int64(limit), "the bound")
					assert.LessOrEqual(t, byNS[ns].Add(1), int64(limit/2), "namespace ns-%d's share", ns)
					runtime.Gosched()
					byNS[ns].Add(-1)
					total.Add(-1)
					if id%2 == 0 { // half give their place up before their bookkeeping, twice
						release()
						release()
						runtime.Gosched()
					}
				})
				if i%3 == 0 {
					cancel()
				} else {
					defer cancel()
				}
			}
		})
	}
	done := make(chan struct{})
	go func() { all.Wait(); close(done) }()
	awaitClosed(t, done, "every run")
	for id := range calls {
		require.Equal(t, int32(1), calls[id].Load(), "run %d called once", id)
	}
	running, waiting := g.counts()
	assert.Zero(t, running)
	assert.Zero(t, waiting)
	assert.Empty(t, g.ring)
	assert.Empty(t, g.queues)
	assert.Empty(t, g.inUse)
	assert.Empty(t, g.watches)
}

// A slot's waiting runs share their term's context, and the gate watches it once, not once
// a run. Its end calls every run waiting with it, and only those; the watch goes with the
// last of its runs, whether they were admitted or abandoned.
func TestGateWatchesEachContextOnce(t *testing.T) {
	g := NewGate(1, nil)
	release := make(chan struct{})
	started := make(chan struct{})
	g.Go(context.Background(), "x", func(func()) { close(started); <-release })
	<-started

	term, endTerm := context.WithCancel(context.Background())
	defer endTerm()
	other, endOther := context.WithCancel(context.Background())
	defer endOther()
	var abandoned, ranOther sync.WaitGroup
	abandoned.Add(1000)
	for i := range 1000 {
		g.Go(term, fmt.Sprint("ns-", i%3), func(func()) {
			assert.Error(t, term.Err(), "called only once the term ended")
			abandoned.Done()
		})
	}
	ranOther.Add(10)
	for range 10 {
		g.Go(other, "ns-0", func(func()) {
			assert.NoError(t, other.Err(), "a run of the other context is not abandoned")
			ranOther.Done()
		})
	}
	g.mu.Lock()
	require.Len(t, g.watches, 2, "one watch for each context")
	assert.Equal(t, 1000, g.watches[term].bodies)
	g.mu.Unlock()

	endTerm()
	done := make(chan struct{})
	go func() { abandoned.Wait(); close(done) }()
	awaitClosed(t, done, "the term's waiting runs")
	running, waiting := g.counts()
	assert.Equal(t, 1, running, "the place is still held")
	assert.Equal(t, 10, waiting, "the other context's runs still wait")
	g.mu.Lock()
	assert.NotContains(t, g.watches, context.Context(term), "the ended context's watch went with its runs")
	g.mu.Unlock()

	close(release)
	done = make(chan struct{})
	go func() { ranOther.Wait(); close(done) }()
	awaitClosed(t, done, "the other context's runs")
	g.mu.Lock()
	assert.Empty(t, g.watches, "the watch went with its last run admitted")
	g.mu.Unlock()
}

// The gate's cost per run against a goroutine per run, for a slot of 10 000 runs whose
// bodies each grow their stack as a call does (growStack): go test -bench Slot -run '^$'.
func BenchmarkSlotThroughTheGate(b *testing.B) {
	for b.Loop() {
		g := NewGate(1024, nil)
		var all sync.WaitGroup
		all.Add(10_000)
		for range 10_000 {
			g.Go(context.Background(), "default", func(func()) { growStack(0); all.Done() })
		}
		all.Wait()
	}
}

func BenchmarkSlotGoroutinePerRun(b *testing.B) {
	for b.Loop() {
		var all sync.WaitGroup
		all.Add(10_000)
		for range 10_000 {
			go func() { growStack(0); all.Done() }()
		}
		all.Wait()
	}
}

// A run that gives its place up once its body is done (its end waits for its batch) lets
// the next waiting run begin at once, while it still records; giving it up twice frees one
// place, not two.
func TestGateReleasedPlaceGoesToTheNextRunAtOnce(t *testing.T) {
	g := NewGate(1, nil)
	recording, recorded := make(chan struct{}), make(chan struct{})
	g.Go(context.Background(), "a", func(release func()) {
		release()
		release()
		close(recording)
		<-recorded // the run's end waiting for its batch
	})
	awaitClosed(t, recording, "the first run's record")
	secondStarted, secondHolds := make(chan struct{}), make(chan struct{})
	g.Go(context.Background(), "b", func(func()) { close(secondStarted); <-secondHolds })
	awaitClosed(t, secondStarted, "the next run, while the first still records")
	third := make(chan struct{})
	g.Go(context.Background(), "c", func(func()) { close(third) })
	running, waiting := g.counts()
	assert.Equal(t, 1, running, "the second run holds the one place")
	assert.Equal(t, 1, waiting, "the third run waits: the first run's place was freed once")
	close(recorded)
	close(secondHolds)
	awaitClosed(t, third, "the third run, once the second ended")
}

// A run's contexts are made as its body begins, which may be after its term ended (it
// waited for a place): its start context must then be ended already, or the body would
// begin a call the next leader's recovery makes again. AfterFunc alone ends it later, in a
// goroutine of its own.
func TestEndsWithAnEndedContextIsEndedAtOnce(t *testing.T) {
	ended, end := context.WithCancel(context.Background())
	end()
	for range 1000 {
		ctx, stop := endsWith(context.Background(), ended, errTermStopped)
		require.ErrorIs(t, context.Cause(ctx), errTermStopped)
		stop()
	}
}
