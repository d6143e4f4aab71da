package jobs

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/schedulerhq/scheduler/internal/jobcontract"
	"github.com/schedulerhq/scheduler/internal/logging"
	"github.com/schedulerhq/scheduler/internal/store"
)

// Tuning of the pipeline.
const (
	// sendGrace is how long sends already in flight when the run is cancelled may still take
	// to finish, so that their outcome is known and recorded rather than left for Reclaim.
	sendGrace = 5 * time.Second
	// recordTimeout bounds recording outcomes and giving claims back once the run's context
	// is done: a message that left must be recorded even when the run is being cancelled.
	recordTimeout = 10 * time.Second
	// recordBatchMax bounds the outcomes one record transaction writes. Outcomes are recorded
	// as they arrive: one transaction takes all those waiting, so the transactions grow with
	// the send rate instead of limiting it.
	recordBatchMax = 1000
	// recordWaitMax bounds how long the recorder waits for the sends still in flight before
	// it records the outcomes it holds: one transaction per wave of sends instead of one per
	// handful of outcomes (each transaction is a durable commit), yet a slow provider's
	// outcomes are still recorded within this delay.
	recordWaitMax = 200 * time.Millisecond
)

// HandOverDrain is how long a resigning leader keeps its lock for a run to record what it
// sent (leader.Config.DrainTimeout): the grace for sends in flight plus the bound on
// recording their outcomes.
const HandOverDrain = sendGrace + recordTimeout

// Hooks let a job write its own rows beside the pipeline's, in the same fenced transaction.
type Hooks struct {
	// OnSent runs in the transaction that records sent as SENT (abandon-recovery stamps its
	// leads).
	OnSent func(ctx context.Context, tx pgx.Tx, sent []Message) error
	// OnRelease runs in the transaction that gives back released, first claims never handed
	// to the sender, just before their rows are deleted (abandon-recovery unmarks the leads
	// so that the next run claims them again).
	OnRelease func(ctx context.Context, tx pgx.Tx, released []Message) error
}

// Outbox is one run's use of the pipeline: each batch of claimed messages (Send) goes out
// concurrently, up to the pipeline's concurrency, and the outcomes are recorded as they come
// by a recorder of their own. Close ends it.
type Outbox struct {
	p     *Pipeline
	env   *jobcontract.Env
	hooks Hooks
	ctx   context.Context // the run's: its end stops handing out sends
	// sendCtx is what sends run under: it ends sendGrace after ctx, so that a send in
	// flight can finish and its outcome be recorded.
	sendCtx  context.Context
	stopSend context.CancelFunc

	outcomes chan outcome
	recorded chan struct{} // closed when the recorder has written its last outcome
	// inFlight counts the messages handed to Send whose outcome is not in outcomes yet (or
	// that were given back): the recorder waits for them before it records.
	inFlight atomic.Int64

	mu     sync.Mutex
	unsent []Message // claims given back at Close
	stats  jobcontract.Stats
	err    error
}

// outcome is one send's result.
type outcome struct {
	m          Message
	providerID string
	err        error
	// cut: the send failed after sendGrace had run out, so it may or may not have gone out.
	cut bool
}

// sendOnCommit hands msgs, claimed in b's transaction, to out once that transaction has
// committed, never before (a claim rolled back must not be sent); a dry run counts them as
// Changed and sends none.
func sendOnCommit[R any](b *jobcontract.Batch[R], out *Outbox, msgs []Message) {
	b.AfterCommit(len(msgs), func() { out.Send(msgs...) })
}

// Open starts the run's outbox. The caller must Close it, also on error paths.
func (p *Pipeline) Open(ctx context.Context, env *jobcontract.Env, hooks Hooks) *Outbox {
	o := &Outbox{
		p: p, env: env, hooks: hooks, ctx: ctx,
		outcomes: make(chan outcome, cap(p.slots)),
		recorded: make(chan struct{}),
	}
	// The sender logs through the run's logger, so its lines carry the run's run_id.
	o.sendCtx, o.stopSend = context.WithCancel(logging.NewContext(context.WithoutCancel(ctx), env.Log))
	stopGrace := context.AfterFunc(ctx, func() { time.AfterFunc(sendGrace, o.stopSend) })
	go func() {
		defer close(o.recorded)
		defer stopGrace()
		o.record()
	}()
	return o
}

// Send sends msgs, claims of a committed transaction, concurrently (each within a pipeline
// slot and the provider's rate), and returns when every one has gone out or been given
// back: a walk's applier claims its next batch only then, so a crash leaves at most
// Walk.Parallel batches of claims behind. Safe for concurrent use. Once the run's context is
// done no send starts: the rest is given back at Close.
func (o *Outbox) Send(msgs ...Message) {
	var wave sync.WaitGroup
	defer wave.Wait()
	o.inFlight.Add(int64(len(msgs)))
	for i, m := range msgs {
		if err := o.acquire(); err != nil {
			o.giveBack(msgs[i:]...)
			o.inFlight.Add(-int64(len(msgs) - i))
			return
		}
		wave.Add(1)
		go func() {
			defer wave.Done()
			oc := o.send(m)
			<-o.p.slots
			o.outcomes <- oc
			// After the outcome is queued: the recorder that sees no send in flight has
			// every outcome of the wave.
			o.inFlight.Add(-1)
		}()
	}
}

// send sends m and returns its outcome. A panic in the sender is recovered here, on the
// send's goroutine, where it would end the process: it is m's outcome, as a send error is
// (m may or may not have gone out), and the run's error.
func (o *Outbox) send(m Message) outcome {
	var id string
	err := jobcontract.CatchPanic(func() error {
		var err error
		id, err = o.p.sender.Send(o.sendCtx, m)
		return err
	})
	var pe *jobcontract.PanicError
	if errors.As(err, &pe) {
		o.mu.Lock()
		o.err = errors.Join(o.err, fmt.Errorf("send the message of delivery %d: %w", m.DeliveryID, err))
		o.mu.Unlock()
	}
	return outcome{m: m, providerID: id, err: err, cut: err != nil && o.sendCtx.Err() != nil}
}

func (o *Outbox) giveBack(msgs ...Message) {
	o.mu.Lock()
	o.unsent = append(o.unsent, msgs...)
	o.mu.Unlock()
}

// acquire waits for the provider's rate and a free slot; it fails once the run's context is
// done, so that no new send starts after a cancellation.
func (o *Outbox) acquire() error {
	if err := o.ctx.Err(); err != nil {
		return err
	}
	if o.p.limiter != nil {
		if err := o.p.limiter.Wait(o.ctx); err != nil {
			return err
		}
	}
	select {
	case o.p.slots <- struct{}{}:
	case <-o.ctx.Done():
		return o.ctx.Err()
	}
	// Both were ready at once: a cancelled run still starts nothing.
	if err := o.ctx.Err(); err != nil {
		<-o.p.slots
		return err
	}
	return nil
}

// record writes outcomes as they arrive: each transaction takes every outcome waiting and,
// while sends are still in flight, those that arrive within recordWaitMax (up to
// recordBatchMax), so that a wave of sends is usually recorded in one transaction.
func (o *Outbox) record() {
	batch := make([]outcome, 0, recordBatchMax)
	wait := time.NewTimer(recordWaitMax)
	defer wait.Stop()
	for first := range o.outcomes {
		batch = append(batch[:0], first)
		wait.Reset(recordWaitMax)
	more:
		for len(batch) < recordBatchMax {
			select {
			case oc, ok := <-o.outcomes:
				if !ok {
					break more
				}
				batch = append(batch, oc)
				continue
			default:
			}
			if o.inFlight.Load() == 0 {
				break more // nothing more is coming soon
			}
			select {
			case oc, ok := <-o.outcomes:
				if !ok {
					break more
				}
				batch = append(batch, oc)
			case <-wait.C:
				break more
			}
		}
		o.recordBatch(batch)
	}
}

// recordOutcomesSQL stores send outcomes: SENT with the provider's id or FAILED with the
// error, only for rows still PENDING under the same claim (attempt).
//
// The rows are looked up by primary key. The status guard compares with a column of the
// outcomes (@pending, 'PENDING') rather than a constant: a constant would let the planner,
// told by the statistics that few rows are PENDING, scan message_deliveries_pending_idx
// instead, whose entries include every row recorded since the last vacuum, so that each
// record of a large wave would visit all the rows recorded before it.
const recordOutcomesSQL = `
UPDATE message_deliveries d
SET status              = CASE WHEN o.error IS NULL THEN 'SENT' ELSE 'FAILED' END,
    provider_message_id = o.provider_message_id,
    error               = o.error,
    sent_at             = CASE WHEN o.error IS NULL THEN now() END
FROM unnest(@ids::bigint[], @attempts::int[], @provider_ids::text[], @errors::text[], @pending::text[])
    AS o (id, attempt, provider_message_id, error, pending)
WHERE d.id = o.id AND d.attempts = o.attempt AND d.status = o.pending`

func (o *Outbox) recordBatch(batch []outcome) {
	var ids []int64
	var attempts []int
	var providerIDs, errs []*string
	var sent []Message
	var st jobcontract.Stats
	for _, oc := range batch {
		if oc.cut {
			// Cut off by the cancellation: it may or may not have gone out. Left PENDING
			// for Reclaim, which applies the crash rule.
			st.Count("unknown", 1)
			o.env.Log.Warn("send cut off by the run's end; outcome unknown, left PENDING for a later run",
				"delivery_id", oc.m.DeliveryID, "error", oc.err)
			continue
		}
		ids = append(ids, oc.m.DeliveryID)
		attempts = append(attempts, oc.m.Attempt)
		if oc.err != nil {
			msg := oc.err.Error()
			providerIDs, errs = append(providerIDs, nil), append(errs, &msg)
			st.Errors++
			st.Count("failed", 1)
			o.env.Log.Warn("message failed", "delivery_id", oc.m.DeliveryID, "channel", oc.m.Channel,
				"template", oc.m.Template, "error", oc.err)
			continue
		}
		var pid *string
		if oc.providerID != "" {
			pid = &oc.providerID
		}
		providerIDs, errs = append(providerIDs, pid), append(errs, nil)
		sent = append(sent, oc.m)
		st.Changed++
		st.Count("sent", 1)
	}
	var err error
	if len(ids) > 0 {
		err = o.tx(func(ctx context.Context, tx pgx.Tx) error {
			// Planned for this batch's arrays each time (an unnamed statement): a plan cached
			// for "about ten ids" joins the batch with the table row by row against every
			// outcome, quadratic in the batch once the recorder takes hundreds at a time.
			_, err := tx.Exec(ctx, recordOutcomesSQL, pgx.QueryExecModeExec, pgx.NamedArgs{
				"ids": ids, "attempts": attempts, "provider_ids": providerIDs, "errors": errs,
				"pending": slices.Repeat([]string{"PENDING"}, len(ids)),
			})
			if err == nil && o.hooks.OnSent != nil && len(sent) > 0 {
				// The recorder's goroutine must survive the job's hook: recovered, its panic
				// rolls this record back and fails the run, and the recorder goes on.
				err = jobcontract.CatchPanic(func() error { return o.hooks.OnSent(ctx, tx, sent) })
			}
			return err
		})
		st.Count("record_batches", 1)
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	o.stats.Add(st)
	if err != nil {
		o.stats.Count("unrecorded", int64(len(ids)))
		o.err = errors.Join(o.err, fmt.Errorf(
			"record the outcomes of %d messages (they stay PENDING until a later run settles them): %w", len(ids), err))
	}
}

// tx runs fn in a fenced transaction: in the run's context while it lasts, then in a fresh
// bounded one, so that what is known is written even during a cancellation — also when the
// cancellation lands in the middle of the transaction, which then rolled back and is written
// again (fn's statements are guarded by the rows' state, so a second write changes nothing
// twice). The fence still refuses the writes of a deposed leader.
func (o *Outbox) tx(fn func(ctx context.Context, tx pgx.Tx) error) error {
	if o.ctx.Err() == nil {
		err := o.env.Tx(o.ctx, func(tx pgx.Tx) error { return fn(o.ctx, tx) })
		if err == nil || o.ctx.Err() == nil || errors.Is(err, store.ErrNotLeader) {
			return err
		}
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(o.ctx), recordTimeout)
	defer cancel()
	return o.env.Tx(ctx, func(tx pgx.Tx) error { return fn(ctx, tx) })
}

// releaseSQL gives back claims never handed to the sender: a first claim's row is deleted,
// so the next run claims the message afresh; a re-claim (attempts > 1, whose message may
// have gone out before the crash that orphaned it) is marked orphaned at once, so the next
// Reclaim resends it under its Idempotency-Key.
const releaseSQL = `
WITH released AS (
    DELETE FROM message_deliveries d
    USING unnest(@ids::bigint[], @attempts::int[]) AS u (id, attempt)
    WHERE d.id = u.id AND d.status = 'PENDING' AND d.attempts = u.attempt AND u.attempt = 1
    RETURNING d.id
),
orphaned AS (
    UPDATE message_deliveries d
    SET claimed_at = '-infinity'
    FROM unnest(@ids::bigint[], @attempts::int[]) AS u (id, attempt)
    WHERE d.id = u.id AND d.status = 'PENDING' AND d.attempts = u.attempt AND u.attempt > 1
    RETURNING d.id
)
SELECT (SELECT count(*) FROM released) + (SELECT count(*) FROM orphaned)`

// Close ends the outbox, once the walk that fed it has returned: every known outcome is recorded and unsent claims are given back. It
// returns the outbox's counts — Changed and Detail "sent" are the messages sent, Errors and
// "failed" those the provider refused, "released" the claims given back, "unknown" the sends
// cut off — and the recording errors, if any.
func (o *Outbox) Close() (jobcontract.Stats, error) {
	close(o.outcomes)
	<-o.recorded
	o.stopSend()

	o.mu.Lock()
	unsent := o.unsent
	o.mu.Unlock()
	if len(unsent) > 0 {
		var n int64
		err := o.tx(func(ctx context.Context, tx pgx.Tx) error {
			if o.hooks.OnRelease != nil {
				var first []Message
				for _, m := range unsent {
					if m.Attempt == 1 {
						first = append(first, m)
					}
				}
				if err := jobcontract.CatchPanic(func() error { return o.hooks.OnRelease(ctx, tx, first) }); err != nil {
					return err
				}
			}
			return tx.QueryRow(ctx, releaseSQL, pgx.NamedArgs{
				"ids":      jobcontract.Column(unsent, func(m Message) int64 { return m.DeliveryID }),
				"attempts": jobcontract.Column(unsent, func(m Message) int { return m.Attempt }),
			}).Scan(&n)
		})
		o.mu.Lock()
		if err != nil {
			o.err = errors.Join(o.err, fmt.Errorf(
				"give back %d unsent claims (a later run settles them as orphans): %w", len(unsent), err))
		} else {
			o.stats.Count("released", n)
		}
		o.mu.Unlock()
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.stats.Detail["sent"]+o.stats.Detail["failed"]+o.stats.Detail["released"] > 0 {
		o.env.Log.Info("messages delivered", "provider", o.p.sender.Provider(), "sent", o.stats.Detail["sent"],
			"failed", o.stats.Detail["failed"], "released", o.stats.Detail["released"],
			"unknown", o.stats.Detail["unknown"], "record_batches", o.stats.Detail["record_batches"])
	}
	return o.stats, o.err
}
