package jobs

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/schedulerhq/scheduler/internal/logging"
)

// AbandonSettings configure abandon-recovery.
type AbandonSettings struct {
	// Delay is how long after starting a form a lead that has not submitted it counts as
	// abandoned.
	Delay time.Duration
	// ClaimTimeout is how long a claimed message may stay PENDING before its claim counts as
	// orphaned by a crash. It must exceed the longest send (webhook timeout × attempts plus
	// backoff), or a slow send still going on would be taken for a crashed one.
	ClaimTimeout time.Duration
	// BatchSize bounds the leads claimed, and so the messages sent, per batch.
	BatchSize int
}

// Abandon-recovery defaults.
const (
	abandonDelayDefault        = 30 * time.Minute
	abandonClaimTimeoutDefault = 10 * time.Minute
	abandonBatchSizeDefault    = 100
	// RecoveryTemplate is the template of the recovery message.
	RecoveryTemplate = "abandon-recovery"
)

// AbandonRecovery sends one recovery message to each lead that started a form and did not
// submit it within the delay.
//
// A message is sent at most once (DESIGN.md; the seeds' de-duplication through
// message_deliveries):
//  1. Claim, in a fenced transaction per batch, before any send: each lead is try-locked,
//     marked abandoned (guarded: not submitted, not yet claimed) and gets a PENDING
//     message_deliveries row, inserted ON CONFLICT DO NOTHING on the unique (provider,
//     channel, to, payload_hash) — payload_hash is the SHA-256 of the canonical payload
//     (PostgreSQL's jsonb text form, whose keys are ordered). Only rows this run inserted are
//     sent.
//  2. Send, outside any transaction (no transaction is held open across network I/O).
//  3. Record each outcome (SENT with the provider's id, or FAILED with the error) in a
//     fenced transaction, guarded by status PENDING; SENT also stamps leads.recovery_sent_at.
//
// A crash (or a deposed leader) between claim and record leaves a PENDING row whose outcome
// is unknown: the message may or may not have gone out. Once its claim is older than
// ClaimTimeout the rule is: if the row's provider is the current sender's and that sender is
// Idempotent (the webhook sender: the receiver de-duplicates on the delivery's
// Idempotency-Key), it is re-claimed and sent again under the same key, so the receiver
// delivers it once; otherwise it is marked FAILED ("outcome unknown after crash") and never
// resent, because a possible duplicate is worse than a missing reminder.
type AbandonRecovery struct {
	s      AbandonSettings
	sender Sender
}

// NewAbandonRecovery returns the abandon-recovery job; zero settings take the defaults.
func NewAbandonRecovery(s AbandonSettings, sender Sender) Job {
	if s.Delay <= 0 {
		s.Delay = abandonDelayDefault
	}
	if s.ClaimTimeout <= 0 {
		s.ClaimTimeout = abandonClaimTimeoutDefault
	}
	if s.BatchSize <= 0 {
		s.BatchSize = abandonBatchSizeDefault
	}
	return &AbandonRecovery{s: s, sender: sender}
}

func (*AbandonRecovery) Name() string { return "abandon-recovery" }

func (*AbandonRecovery) Defaults() Defaults {
	return Defaults{Schedule: "*/15 * * * *", Timeout: 10 * time.Minute}
}

// claimBatch claims the next batch of abandoned leads, in one statement: read the next
// unclaimed leads started before the cutoff ($2) in keyset order, try-lock them, mark the
// locked ones still unsubmitted and unclaimed as abandoned, and insert their PENDING
// deliveries. It returns the counts, the claimed messages and the keyset position reached.
const claimBatch = `
WITH batch AS MATERIALIZED (
    SELECT l.id, l.form_id, f.name AS form_name, l.channel, l.started_at,
           CASE l.channel WHEN 'EMAIL' THEN l.email ELSE l.phone END AS "to"
    FROM leads l
    JOIN forms f ON f.id = l.form_id
    WHERE l.submitted_at IS NULL AND l.abandoned_at IS NULL
      AND l.started_at <= $2
      AND (l.started_at, l.id) > ($3, $4)
    ORDER BY l.started_at, l.id
    LIMIT $5
),
locked AS MATERIALIZED (
    SELECT * FROM batch
    WHERE pg_try_advisory_xact_lock(hashtextextended($1::text || ':' || id::text, 0))
),
marked AS (
    UPDATE leads l
    SET abandoned_at = $6
    FROM locked k
    WHERE l.id = k.id
      -- Guard: still not submitted and not claimed by another run since the batch read it.
      AND l.submitted_at IS NULL AND l.abandoned_at IS NULL
    RETURNING l.id
),
message AS (
    SELECT k.id AS lead_id, k.channel, k."to",
           jsonb_build_object('template', $8::text, 'lead_id', k.id, 'form_id', k.form_id,
                              'form_name', k.form_name) AS payload
    FROM locked k
    JOIN marked USING (id)
),
claimed AS (
    INSERT INTO message_deliveries (provider, channel, "to", template, payload_hash, payload, lead_id, status, attempts)
    SELECT $7, channel, "to", $8, encode(sha256(convert_to(payload::text, 'UTF8')), 'hex'), payload, lead_id,
           'PENDING', 1
    FROM message
    ON CONFLICT (provider, channel, "to", payload_hash) DO NOTHING
    RETURNING id AS delivery_id, attempts AS attempt, provider, channel, "to", template, payload
)
SELECT (SELECT count(*) FROM batch),
       (SELECT count(*) FROM locked),
       (SELECT count(*) FROM marked),
       (SELECT coalesce(jsonb_agg(claimed ORDER BY delivery_id), '[]') FROM claimed),
       coalesce((SELECT max(started_at) FROM batch), $3),
       coalesce((SELECT max(id) FROM batch WHERE started_at = (SELECT max(started_at) FROM batch)), $4)`

// orphanBatch settles the next batch of claims orphaned by a crash (PENDING, claimed more than
// $3 ago), in one statement: try-lock their leads, then re-claim those the current sender ($6,
// resendable $7) may send again and mark the others FAILED ($8 the reason).
const orphanBatch = `
WITH batch AS MATERIALIZED (
    SELECT id, lead_id, claimed_at
    FROM message_deliveries
    WHERE status = 'PENDING' AND template = $2 AND lead_id IS NOT NULL
      AND claimed_at < now() - $3::interval
      AND (claimed_at, id) > ($4, $5)
    ORDER BY claimed_at, id
    LIMIT $9
),
locked AS MATERIALIZED (
    SELECT * FROM batch
    WHERE pg_try_advisory_xact_lock(hashtextextended($1::text || ':' || lead_id::text, 0))
),
reclaimed AS (
    UPDATE message_deliveries d
    SET claimed_at = now(), attempts = d.attempts + 1
    FROM locked k
    WHERE d.id = k.id AND d.status = 'PENDING' AND d.claimed_at = k.claimed_at
      AND d.provider = $6 AND $7::boolean
    RETURNING d.id AS delivery_id, d.attempts AS attempt, d.provider, d.channel, d."to", d.template, d.payload
),
failed AS (
    UPDATE message_deliveries d
    SET status = 'FAILED', error = $8::text || ' (claimed at ' || k.claimed_at::text || ' by provider ' || d.provider || ')'
    FROM locked k
    WHERE d.id = k.id AND d.status = 'PENDING' AND d.claimed_at = k.claimed_at
      AND NOT (d.provider = $6 AND $7::boolean)
    RETURNING d.id
)
SELECT (SELECT count(*) FROM batch),
       (SELECT count(*) FROM locked),
       (SELECT count(*) FROM failed),
       (SELECT coalesce(jsonb_agg(reclaimed ORDER BY delivery_id), '[]') FROM reclaimed),
       coalesce((SELECT max(claimed_at) FROM batch), $4),
       coalesce((SELECT max(id) FROM batch WHERE claimed_at = (SELECT max(claimed_at) FROM batch)), $5)`

// recordOutcomes stores the send outcomes of a batch: SENT with the provider's id or FAILED
// with the error, only for rows still PENDING under the same claim (attempt); a sent message
// stamps its lead.
const recordOutcomes = `
WITH outcome AS (
    SELECT * FROM unnest($1::bigint[], $2::int[], $3::text[], $4::text[]) AS o (id, attempt, provider_message_id, error)
),
settled AS (
    UPDATE message_deliveries d
    SET status              = CASE WHEN o.error IS NULL THEN 'SENT' ELSE 'FAILED' END,
        provider_message_id = o.provider_message_id,
        error               = o.error,
        sent_at             = CASE WHEN o.error IS NULL THEN now() END
    FROM outcome o
    WHERE d.id = o.id AND d.status = 'PENDING' AND d.attempts = o.attempt
    RETURNING d.lead_id, d.status
)
UPDATE leads l
SET recovery_sent_at = now()
FROM settled s
WHERE l.id = s.lead_id AND s.status = 'SENT' AND l.recovery_sent_at IS NULL`

// releaseClaims gives back first claims whose message was never handed to the sender (the run
// was cancelled first): the delivery row goes and the lead is unmarked, so that the next run
// claims and sends it afresh instead of treating it as an orphan of unknown outcome.
const releaseClaims = `
WITH released AS (
    DELETE FROM message_deliveries
    WHERE id = ANY($1::bigint[]) AND status = 'PENDING' AND attempts = 1
    RETURNING lead_id
)
UPDATE leads l
SET abandoned_at = NULL
FROM released r
WHERE l.id = r.lead_id AND l.recovery_sent_at IS NULL`

// recordTimeout bounds the recording of outcomes once the run's context is done: a message
// that left must be recorded even when the run is being cancelled, or it would become an
// orphan of unknown outcome. The fence still refuses the write of a deposed leader.
const recordTimeout = 10 * time.Second

// orphanReason is stored on a PENDING delivery that is not resent after a crash.
const orphanReason = "outcome unknown after crash: claimed but no send result was recorded; " +
	"not resent because its provider does not de-duplicate on the idempotency key"

// Run settles orphaned claims, then claims and sends the recovery messages of the leads
// abandoned before now - Delay. A dry run counts the messages it would send, claims and
// sends nothing.
func (j *AbandonRecovery) Run(ctx context.Context, env *Env) (Stats, error) {
	var st Stats
	err := j.settleOrphans(ctx, env, &st)
	if err == nil {
		err = j.claimAndSend(ctx, env, &st)
	}
	env.Log.Info("abandoned leads recovered", "processed", st.Processed, "sent", st.Detail["sent"],
		"failed", st.Detail["failed"], "skipped_locked", st.SkippedLocked, "dry_run", env.Params.DryRun)
	return st, err
}

func (j *AbandonRecovery) settleOrphans(ctx context.Context, env *Env, st *Stats) error {
	lastAt, lastID := time.Time{}, int64(0)
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		var seen, locked, failed int64
		var msgs []Message
		err := inBatchTx(ctx, env, func(tx pgx.Tx) error {
			return tx.QueryRow(ctx, orphanBatch, j.Name(), RecoveryTemplate, j.s.ClaimTimeout, lastAt, lastID,
				j.sender.Provider(), j.sender.Idempotent(), orphanReason, j.s.BatchSize,
			).Scan(&seen, &locked, &failed, &msgs, &lastAt, &lastID)
		})
		if err != nil {
			return fmt.Errorf("settle orphaned claims: %w", err)
		}
		st.Processed += seen
		st.SkippedLocked += seen - locked
		st.Errors += failed
		st.Count("orphan_failed", failed)
		st.Count("orphan_resent", int64(len(msgs)))
		if failed > 0 {
			env.Log.Warn("claims orphaned by a crash marked FAILED, not resent", "count", failed)
		}
		if env.Params.DryRun {
			st.Changed += int64(len(msgs)) // what a real run would resend; the re-claims were rolled back
		} else if err := j.send(ctx, env, st, msgs); err != nil {
			return err
		}
		if seen < int64(j.s.BatchSize) {
			return nil
		}
	}
}

func (j *AbandonRecovery) claimAndSend(ctx context.Context, env *Env, st *Stats) error {
	cutoff := env.Now.Add(-j.s.Delay)
	lastAt, lastID := time.Time{}, int64(0)
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		var seen, locked, marked int64
		var msgs []Message
		err := inBatchTx(ctx, env, func(tx pgx.Tx) error {
			return tx.QueryRow(ctx, claimBatch, j.Name(), cutoff, lastAt, lastID, j.s.BatchSize, env.Now,
				j.sender.Provider(), RecoveryTemplate,
			).Scan(&seen, &locked, &marked, &msgs, &lastAt, &lastID)
		})
		if err != nil {
			return fmt.Errorf("claim abandoned leads: %w", err)
		}
		st.Processed += seen
		st.SkippedLocked += seen - locked
		st.Count("claimed", int64(len(msgs)))
		// Locked but refused by the guard: submitted or claimed by another run meanwhile.
		if stale := locked - marked; stale > 0 {
			st.Count("stale", stale)
		}
		// Marked abandoned but the unique key already held the message: the last line of
		// defence refused a duplicate.
		if dup := marked - int64(len(msgs)); dup > 0 {
			st.Count("duplicate", dup)
		}
		if env.Params.DryRun {
			st.Changed += int64(len(msgs)) // what a real run would send; the claims were rolled back
		} else if err := j.send(ctx, env, st, msgs); err != nil {
			return err
		}
		if seen < int64(j.s.BatchSize) {
			return nil
		}
	}
}

// send delivers the claimed messages one by one, outside any transaction, then records the
// outcomes in one fenced transaction. Once ctx is done it hands no more messages to the
// sender and gives their claims back. If recording fails (deposed, database gone), the rows
// stay PENDING and a later run settles them as orphans.
func (j *AbandonRecovery) send(ctx context.Context, env *Env, st *Stats, msgs []Message) error {
	if len(msgs) == 0 {
		return nil
	}
	var ids, unsent []int64
	var attempts []int
	var providerIDs, errs []*string
	for _, m := range msgs {
		if ctx.Err() != nil {
			unsent = append(unsent, m.DeliveryID)
			continue
		}
		ids = append(ids, m.DeliveryID)
		attempts = append(attempts, m.Attempt)
		pid, err := j.sender.Send(logging.NewContext(ctx, env.Log), m)
		if err != nil {
			msg := err.Error()
			providerIDs, errs = append(providerIDs, nil), append(errs, &msg)
			st.Errors++
			st.Count("failed", 1)
			env.Log.Warn("recovery message failed", "delivery_id", m.DeliveryID, "channel", m.Channel, "error", err)
			continue
		}
		var pidOrNull *string
		if pid != "" {
			pidOrNull = &pid
		}
		providerIDs, errs = append(providerIDs, pidOrNull), append(errs, nil)
		st.Changed++
		st.Count("sent", 1)
	}
	recordCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), recordTimeout)
	defer cancel()
	err := env.Tx(recordCtx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(recordCtx, recordOutcomes, ids, attempts, providerIDs, errs); err != nil {
			return err
		}
		_, err := tx.Exec(recordCtx, releaseClaims, unsent)
		return err
	})
	if err != nil {
		return fmt.Errorf("record the outcomes of %d messages (they stay PENDING until a later run settles them): %w",
			len(ids), err)
	}
	if len(unsent) > 0 {
		st.Count("released", int64(len(unsent)))
		return ctx.Err()
	}
	return nil
}
