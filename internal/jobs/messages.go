package jobs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
	"golang.org/x/time/rate"

	"github.com/schedulerhq/scheduler/internal/config"
	"github.com/schedulerhq/scheduler/internal/logging"
	"github.com/schedulerhq/scheduler/internal/store"
)

// The message pipeline: the one way every job sends (docs/design.md, "Appointment jobs").
// A message goes out at most once per unique key of message_deliveries (provider, channel,
// "to", payload_hash — payload_hash is the SHA-256 of the payload's canonical jsonb text):
//
//  1. Claim, in the job's fenced batch transaction, before any send (Pipeline.Claim, or the
//     job's own INSERT ... ON CONFLICT DO NOTHING RETURNING MessageColumns): a PENDING row,
//     attempts 1. Only the rows a run inserted are sent; Walk hands them to the Outbox once
//     the batch has committed.
//  2. Send, outside any transaction, concurrently: at most SendSettings.Concurrency sends
//     in flight per replica, paced per provider by SendSettings.Rate.
//  3. Record each outcome (SENT with the provider's id, FAILED with the error) in fenced
//     transactions, several outcomes per transaction, guarded by status PENDING and the
//     claim's attempt.
//
// Cancellation (timeout, cancel request, lost leadership) stops handing out sends at once.
// Sends already in flight get sendGrace to finish; every outcome known by then is recorded
// (in a fresh bounded context, still fenced: a deposed leader's record is refused). Claims
// never handed to the sender are given back: a first claim's row is deleted so the next run
// claims the message afresh, a re-claim is marked orphaned at once. A send cut off by the
// cancellation has an unknown outcome: its row stays PENDING and Pipeline.Reclaim settles it
// after the claim timeout, like a claim left by a crashed replica: resent under the same
// Idempotency-Key when the provider de-duplicates on it (the webhook), else marked FAILED.

// SendSettings bound the pipeline (config: SCHEDULER_SEND_CONCURRENCY, SCHEDULER_SEND_RATE).
type SendSettings struct {
	// Concurrency bounds the sends in flight at once on this replica, all jobs together.
	Concurrency int
	// Rate bounds the sends per second to the provider; 0 means no bound.
	Rate float64
}

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

// Pipeline is the replica's message pipeline for one sender: shared by every job that
// sends, so the concurrency bound and the provider's rate hold for all of them together.
type Pipeline struct {
	sender  Sender
	slots   chan struct{} // one per send in flight
	limiter *rate.Limiter // nil: no rate bound
}

// NewPipeline returns the pipeline that sends through sender. Zero settings take the
// defaults (concurrency 16, no rate bound).
func NewPipeline(sender Sender, s SendSettings) *Pipeline {
	if s.Concurrency <= 0 {
		s.Concurrency = config.SendConcurrencyDefault
	}
	p := &Pipeline{sender: sender, slots: make(chan struct{}, s.Concurrency)}
	if s.Rate > 0 {
		// A burst of up to one second's worth (at most the concurrency): a token bucket with
		// burst 1 would pace high rates with sub-millisecond waits the timer cannot keep.
		burst := min(s.Concurrency, max(1, int(math.Ceil(s.Rate))))
		p.limiter = rate.NewLimiter(rate.Limit(s.Rate), burst)
	}
	return p
}

// Provider names the pipeline's provider, for a job's own claim statement
// (message_deliveries.provider).
func (p *Pipeline) Provider() string { return p.sender.Provider() }

// Draft is a message a job wants to send, before its claim.
type Draft struct {
	Channel  string // EMAIL, SMS or WHATSAPP
	To       string
	Template string
	// Payload is what the template needs; it names the entity and the kind, so that its hash
	// makes the message unique (e.g. {"appointment_id": 7, "kind": "reminder-day"}).
	Payload any
	// LeadID links the delivery to its lead (abandon-recovery); 0 for none.
	LeadID int64
}

// MessageColumns are the columns a claim statement returns (RETURNING MessageColumns), in
// the order ScanMessage reads them.
const MessageColumns = `id, attempts, provider, channel, "to", template, payload`

// ScanMessage reads one row of MessageColumns.
func ScanMessage(row pgx.CollectableRow) (Message, error) {
	var m Message
	// Into []byte: the database's jsonb is valid JSON, and scanning into json.RawMessage
	// would run encoding/json over every payload again.
	var payload []byte
	err := row.Scan(&m.DeliveryID, &m.Attempt, &m.Provider, &m.Channel, &m.To, &m.Template, &payload)
	m.Payload = payload
	return m, err
}

// claimSQL claims drafts: one PENDING delivery each, unless a unique key of
// message_deliveries already holds the message (claimed or sent before, by this run or
// another); only the rows inserted here come back, and only they may be sent.
const claimSQL = `
WITH draft AS (
    SELECT * FROM unnest(@channels::text[], @tos::text[], @templates::text[], @payloads::jsonb[], @lead_ids::bigint[])
        AS d (channel, "to", template, payload, lead_id)
)
INSERT INTO message_deliveries (provider, channel, "to", template, payload_hash, payload, lead_id, status, attempts)
SELECT @provider, channel, "to", template,
       -- jsonb's text form orders the keys: the same payload always hashes the same.
       encode(sha256(convert_to(payload::text, 'UTF8')), 'hex'), payload, nullif(lead_id, 0), 'PENDING', 1
FROM draft
ON CONFLICT DO NOTHING
RETURNING ` + MessageColumns

// Claim claims drafts in tx (a Walk batch's transaction) and returns the messages claimed,
// to be passed to Batch.Send. A draft whose message already has a delivery is left out.
func (p *Pipeline) Claim(ctx context.Context, tx pgx.Tx, drafts []Draft) ([]Message, error) {
	if len(drafts) == 0 {
		return nil, nil
	}
	payloads := make([]json.RawMessage, len(drafts))
	for i, d := range drafts {
		b, err := json.Marshal(d.Payload)
		if err != nil {
			return nil, fmt.Errorf("encode the payload of a %s message: %w", d.Template, err)
		}
		payloads[i] = b
	}
	rows, err := tx.Query(ctx, claimSQL, pgx.NamedArgs{
		"provider":  p.Provider(),
		"channels":  Column(drafts, func(d Draft) string { return d.Channel }),
		"tos":       Column(drafts, func(d Draft) string { return d.To }),
		"templates": Column(drafts, func(d Draft) string { return d.Template }),
		"payloads":  payloads,
		"lead_ids":  Column(drafts, func(d Draft) int64 { return d.LeadID }),
	})
	if err != nil {
		return nil, fmt.Errorf("claim %d messages: %w", len(drafts), err)
	}
	msgs, err := pgx.CollectRows(rows, ScanMessage)
	if err != nil {
		return nil, fmt.Errorf("claim %d messages: %w", len(drafts), err)
	}
	return msgs, nil
}

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
	env   *Env
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
	stats  Stats
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

// Open starts the run's outbox. The caller must Close it, also on error paths.
func (p *Pipeline) Open(ctx context.Context, env *Env, hooks Hooks) *Outbox {
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
			id, err := o.p.sender.Send(o.sendCtx, m)
			<-o.p.slots
			o.outcomes <- outcome{m: m, providerID: id, err: err, cut: err != nil && o.sendCtx.Err() != nil}
			// After the outcome is queued: the recorder that sees no send in flight has
			// every outcome of the wave.
			o.inFlight.Add(-1)
		}()
	}
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
	var st Stats
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
				err = o.hooks.OnSent(ctx, tx, sent)
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
func (o *Outbox) Close() (Stats, error) {
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
				if err := o.hooks.OnRelease(ctx, tx, first); err != nil {
					return err
				}
			}
			return tx.QueryRow(ctx, releaseSQL, pgx.NamedArgs{
				"ids":      Column(unsent, func(m Message) int64 { return m.DeliveryID }),
				"attempts": Column(unsent, func(m Message) int { return m.Attempt }),
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

// Orphans are claims whose outcome was never recorded: their replica crashed, was deposed,
// or cut a send off, between claim and record. Reclaim settles them once their claim is
// older than the claim timeout (a younger one may still be sending elsewhere).
const (
	orphansSQL = `
SELECT id, claimed_at
FROM message_deliveries
WHERE status = 'PENDING' AND template = ANY(@templates)
  AND claimed_at < now() - @claim_timeout::interval
  AND (claimed_at, id) > (@after_at, @after_id)
ORDER BY claimed_at, id
LIMIT @limit`

	// reclaimSQL takes an orphan over when the current sender may send it again (same
	// provider, which de-duplicates on the Idempotency-Key): a new claim, attempt + 1.
	reclaimSQL = `
UPDATE message_deliveries d
SET claimed_at = now(), attempts = d.attempts + 1
FROM unnest(@ids::bigint[], @claimed_ats::timestamptz[]) AS k (id, claimed_at)
WHERE d.id = k.id AND d.status = 'PENDING' AND d.claimed_at = k.claimed_at
  AND d.provider = @provider AND @idempotent::boolean
RETURNING d.id, d.attempts, d.provider, d.channel, d."to", d.template, d.payload`

	// failOrphansSQL marks the others FAILED: a possible duplicate is worse than a missing
	// message.
	failOrphansSQL = `
UPDATE message_deliveries d
SET status = 'FAILED', error = @reason::text || ' (claimed at ' || k.claimed_at::text || ' by provider ' || d.provider || ')'
FROM unnest(@ids::bigint[], @claimed_ats::timestamptz[]) AS k (id, claimed_at)
WHERE d.id = k.id AND d.status = 'PENDING' AND d.claimed_at = k.claimed_at
  AND NOT (d.provider = @provider AND @idempotent::boolean)`
)

// orphanReason is stored on an orphan that is not resent.
const orphanReason = "outcome unknown after crash: claimed but no send result was recorded; " +
	"not resent because its provider does not de-duplicate on the idempotency key"

type orphan struct {
	ID        int64
	ClaimedAt pgtype.Timestamptz
}

// Reclaim settles the orphaned claims of templates, older than claimTimeout, batch by batch
// (lock prefix '<job>:delivery'): it re-claims and hands to out those the pipeline's
// sender may send again, and marks the others FAILED. Counts: Detail "orphan_resent" and
// "orphan_failed" (also counted in Errors).
func (p *Pipeline) Reclaim(ctx context.Context, env *Env, out *Outbox, job string, templates []string,
	claimTimeout time.Duration) (Stats, error) {
	w := &Walk[orphan]{
		Job:       job + ":delivery",
		BatchSize: 500,
		Read:      orphansSQL,
		Args:      pgx.NamedArgs{"templates": templates, "claim_timeout": claimTimeout},
		Start: pgx.NamedArgs{
			"after_at": pgtype.Timestamptz{InfinityModifier: pgtype.NegativeInfinity, Valid: true}, "after_id": int64(0),
		},
		Keyset: func(o orphan) pgx.NamedArgs { return pgx.NamedArgs{"after_at": o.ClaimedAt, "after_id": o.ID} },
		Lock:   func(o orphan) int64 { return o.ID },
		Outbox: out,
		Apply: func(ctx context.Context, b *Batch[orphan]) error {
			args := pgx.NamedArgs{
				"ids":         Column(b.Rows, func(o orphan) int64 { return o.ID }),
				"claimed_ats": Column(b.Rows, func(o orphan) pgtype.Timestamptz { return o.ClaimedAt }),
				"provider":    p.sender.Provider(),
				"idempotent":  p.sender.Idempotent(),
				"reason":      orphanReason,
			}
			rows, err := b.Tx.Query(ctx, reclaimSQL, args)
			if err != nil {
				return fmt.Errorf("re-claim orphans: %w", err)
			}
			msgs, err := pgx.CollectRows(rows, ScanMessage)
			if err != nil {
				return fmt.Errorf("re-claim orphans: %w", err)
			}
			tag, err := b.Tx.Exec(ctx, failOrphansSQL, args)
			if err != nil {
				return fmt.Errorf("mark orphans failed: %w", err)
			}
			b.Stats.Count("orphan_resent", int64(len(msgs)))
			b.Stats.Count("orphan_failed", tag.RowsAffected())
			b.Stats.Errors += tag.RowsAffected()
			if tag.RowsAffected() > 0 {
				env.Log.Warn("claims orphaned by a crash marked FAILED, not resent", "count", tag.RowsAffected())
			}
			b.Send(msgs...)
			return nil
		},
	}
	return w.Run(ctx, env)
}
