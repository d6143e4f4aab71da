package jobs_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schedulerhq/scheduler/internal/jobcontract"
	"github.com/schedulerhq/scheduler/internal/jobs"
	"github.com/schedulerhq/scheduler/internal/store"
	"github.com/schedulerhq/scheduler/internal/testdb"
)

// A panic on a goroutine other than the test's would end the test binary: each of these
// tests fails that way when the goroutine it aims at does not recover.

// requirePanic requires err to carry a recovered panic whose value mentions value, with the
// stack of the goroutine that panicked, naming frame.
func requirePanic(t *testing.T, err error, value, frame string) {
	t.Helper()
	var pe *jobcontract.PanicError
	require.ErrorAs(t, err, &pe)
	assert.Contains(t, fmt.Sprint(pe.Value), value)
	assert.Contains(t, string(pe.Stack), frame, "the stack of the goroutine that panicked")
}

func TestCatchPanicReturnsThePanicAsAnError(t *testing.T) {
	t.Parallel()
	boom := errors.New("boom")
	assert.Same(t, boom, jobcontract.CatchPanic(func() error { return boom }), "an error passes through")
	err := fmt.Errorf("batch 3: %w", jobcontract.CatchPanic(func() error { panic("blew up") }))
	requirePanic(t, err, "blew up", "TestCatchPanicReturnsThePanicAsAnError")
	assert.Equal(t, "batch 3: panic: blew up", err.Error())
}

func TestWalkApplyPanicOnAnApplierIsTheWalksError(t *testing.T) {
	t.Parallel()
	db, url := testdb.Open(t, store.Options{})
	pool := openPool(t, url)
	seedItems(t, pool, 45)
	w := itemWalk(10, new(atomic.Int64))
	w.Lock = func(it item) int64 { return it.ID }
	w.Parallel = 2
	apply := w.Apply
	w.Apply = func(ctx context.Context, b *jobcontract.Batch[item]) error {
		if b.N == 2 {
			var perBatch map[int]int
			//lint:ignore SA5000 the panic under test
			perBatch[b.N]++
		}
		return apply(ctx, b)
	}
	st, err := w.Run(context.Background(), newEnv(t, db, "walk-test"))
	requirePanic(t, err, "assignment to entry in nil map", "TestWalkApplyPanicOnAnApplierIsTheWalksError")
	assert.ErrorContains(t, err, "walk-test batch 2: panic: ")
	states := itemStates(t, pool)
	assert.EqualValues(t, states["done"], st.Changed, "the batches that committed are counted")
	var batch2 int
	require.NoError(t, pool.QueryRow(context.Background(),
		`SELECT count(*) FROM walk_items WHERE state = 'due' AND id BETWEEN 11 AND 20`).Scan(&batch2))
	assert.Equal(t, 10, batch2, "the panicking batch rolled back")
}

func TestWalkReadAheadPanicIsTheWalksError(t *testing.T) {
	t.Parallel()
	for name, breakWalk := range map[string]func(w *jobcontract.Walk[item]){
		"Keyset": func(w *jobcontract.Walk[item]) {
			keyset := w.Keyset
			w.Keyset = func(it item) pgx.NamedArgs {
				if it.ID == 20 {
					panic("keyset blew up")
				}
				return keyset(it)
			}
		},
		"Scan": func(w *jobcontract.Walk[item]) {
			w.Scan = func(row pgx.CollectableRow) (item, error) {
				var it item
				err := row.Scan(&it.ID, &it.Group)
				if it.ID == 15 {
					panic("scan blew up")
				}
				return it, err
			}
		},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			db, url := testdb.Open(t, store.Options{})
			pool := openPool(t, url)
			seedItems(t, pool, 45)
			w := itemWalk(10, new(atomic.Int64))
			breakWalk(w)
			st, err := w.Run(context.Background(), newEnv(t, db, "walk-test"))
			requirePanic(t, err, "blew up", "TestWalkReadAheadPanicIsTheWalksError")
			assert.EqualValues(t, itemStates(t, pool)["done"], st.Changed)
			assert.LessOrEqual(t, st.Changed, int64(10), "no batch after the one whose read panicked")
		})
	}
}

// panickingSender panics when asked to send the message of delivery bad.
type panickingSender struct {
	recordingSender
	bad atomic.Int64
}

func (s *panickingSender) Send(ctx context.Context, m jobs.Message) (string, error) {
	if m.DeliveryID == s.bad.Load() {
		panic("sender blew up")
	}
	return s.recordingSender.Send(ctx, m)
}

// closeWithin closes out, failing the test if Close hangs.
func closeWithin(t *testing.T, out *jobs.Outbox) (jobcontract.Stats, error) {
	t.Helper()
	type closed struct {
		st  jobcontract.Stats
		err error
	}
	done := make(chan closed, 1)
	go func() {
		st, err := out.Close()
		done <- closed{st, err}
	}()
	select {
	case c := <-done:
		return c.st, c.err
	case <-time.After(30 * time.Second):
		t.Fatal("the outbox did not close")
		return jobcontract.Stats{}, nil
	}
}

// A send that panics is that message's failure (it may or may not have gone out, as with a
// send error) and the run's error; the other messages go out and are recorded.
func TestOutboxSendPanicFailsThatMessageAndTheRun(t *testing.T) {
	t.Parallel()
	db, _ := testdb.Open(t, store.Options{})
	env := newEnv(t, db, "pipeline-test")
	sender := &panickingSender{}
	pipe := pipeline(sender)
	msgs := claim(t, env, pipe, testDrafts(0, 3))
	sender.bad.Store(msgs[1].DeliveryID)
	out := pipe.Open(context.Background(), env, jobs.Hooks{})
	out.Send(msgs...)
	st, err := closeWithin(t, out)
	requirePanic(t, err, "sender blew up", "panickingSender")
	assert.EqualValues(t, 2, st.Detail["sent"])
	assert.EqualValues(t, 1, st.Detail["failed"])
	assert.Equal(t, map[string]int{"SENT": 2, "FAILED": 1}, deliveries(t, db.Pool))
	var stored string
	require.NoError(t, db.Pool.QueryRow(context.Background(),
		`SELECT error FROM message_deliveries WHERE id = $1`, msgs[1].DeliveryID).Scan(&stored))
	assert.Equal(t, "panic: sender blew up", stored)
}

// An OnSent hook that panics loses the record it ran in (rolled back: those messages stay
// PENDING for a later run to settle) and fails the run; the recorder goes on recording the
// other outcomes, and Close returns.
func TestOutboxOnSentPanicKeepsTheOtherRecords(t *testing.T) {
	t.Parallel()
	db, _ := testdb.Open(t, store.Options{})
	env := newEnv(t, db, "pipeline-test")
	pipe := pipeline(&recordingSender{})
	msgs := claim(t, env, pipe, testDrafts(0, 3))
	panicked := make(chan struct{})
	out := pipe.Open(context.Background(), env, jobs.Hooks{
		OnSent: func(_ context.Context, _ pgx.Tx, sent []jobs.Message) error {
			if slices.ContainsFunc(sent, func(m jobs.Message) bool { return m.DeliveryID == msgs[0].DeliveryID }) {
				close(panicked)
				panic("hook blew up")
			}
			return nil
		},
	})
	out.Send(msgs[0])
	select {
	case <-panicked: // the first outcome's record has begun: the others go in a record of their own
	case <-time.After(30 * time.Second):
		t.Fatal("the first outcome was not recorded")
	}
	out.Send(msgs[1:]...)
	st, err := closeWithin(t, out)
	requirePanic(t, err, "hook blew up", "TestOutboxOnSentPanicKeepsTheOtherRecords")
	assert.EqualValues(t, 1, st.Detail["unrecorded"])
	assert.Equal(t, map[string]int{"SENT": 2, "PENDING": 1}, deliveries(t, db.Pool))
}
