package leader

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// A resignation waits for work held when it starts and for work a late run registers
// while it waits; it gives up at its deadline.
func TestWorkWaitsForEveryHoldEvenOneTakenWhileWaiting(t *testing.T) {
	var w work
	first := w.hold()
	waited := make(chan bool)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		waited <- w.wait(ctx)
	}()
	late := w.hold() // a run claimed just as the term ended
	first()
	first() // releasing twice counts once
	select {
	case <-waited:
		t.Fatal("wait returned while the late hold was still held")
	case <-time.After(50 * time.Millisecond): // proving a non-event: it must not have returned yet
	}
	late()
	select {
	case ok := <-waited:
		assert.True(t, ok)
	case <-time.After(10 * time.Second):
		t.Fatal("wait did not return once every hold was released")
	}

	stuck := w.hold()
	defer stuck()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	assert.False(t, w.wait(ctx), "a hold never released: wait gives up at its deadline")
	var none *work
	assert.True(t, none.wait(ctx), "a term without work (Term{}) has nothing to wait for")
}

// A term given up keeps its runs going for the grace only: a run still in flight then is
// cut (RunsCtx ends), and the drain still waits, up to its timeout, for it to let go; a
// term lost ends both contexts at once.
func TestADrainCutsTheRunsInFlightAfterItsGrace(t *testing.T) {
	term, end := begin(context.Background(), Term{})
	running := term.Hold()
	drained := make(chan bool, 1)
	end.stopStarting()
	go func() { drained <- term.drain(end, 50*time.Millisecond, waitTimeout) }()
	awaitDone(t, term.RunsCtx(), "the run in flight cut after the grace")
	select {
	case <-drained:
		t.Fatal("the drain ended while the cut run still held the term")
	default:
	}
	running()
	select {
	case ok := <-drained:
		assert.True(t, ok, "every hold released within the drain's timeout")
	case <-time.After(waitTimeout):
		t.Fatal("the drain did not end once the hold was released")
	}

	lost, end := begin(context.Background(), Term{})
	lost.Hold()
	end.lost()
	assert.Error(t, lost.Ctx.Err())
	assert.Error(t, lost.RunsCtx().Err(), "a lost term's runs stop at once, holds or not")
}
