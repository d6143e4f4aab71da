package jobs

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
	"golang.org/x/time/rate"

	"github.com/schedulerhq/scheduler/internal/config"
	"github.com/schedulerhq/scheduler/internal/jobcontract"
)

// The message pipeline: the one way every job sends (docs/design.md, "Appointment jobs").
// A message goes out at most once per unique key of message_deliveries (provider, channel,
// "to", payload_hash — payload_hash is the SHA-256 of the payload's canonical jsonb text):
//
//  1. Claim, in the job's fenced batch transaction, before any send (Pipeline.Claim, or the
//     job's own INSERT ... ON CONFLICT DO NOTHING RETURNING MessageColumns): a PENDING row,
//     attempts 1. Only the rows a run inserted are sent; the walk hands them to the Outbox
//     once the batch has committed (sendOnCommit).
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
const MessageColumns = `id, attempts, provider, channel, "to", template, payload,
    (SELECT deployment_id::text FROM scheduler_identity) AS deployment_id`

// ScanMessage reads one row of MessageColumns.
func ScanMessage(row pgx.CollectableRow) (Message, error) {
	var m Message
	// Into []byte: the database's jsonb is valid JSON, and scanning into json.RawMessage
	// would run encoding/json over every payload again.
	var payload []byte
	err := row.Scan(&m.DeliveryID, &m.Attempt, &m.Provider, &m.Channel, &m.To, &m.Template, &payload, &m.Deployment)
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
// to be handed to the run's Outbox once tx has committed (sendOnCommit). A draft whose message already has a delivery is left out.
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
		"channels":  jobcontract.Column(drafts, func(d Draft) string { return d.Channel }),
		"tos":       jobcontract.Column(drafts, func(d Draft) string { return d.To }),
		"templates": jobcontract.Column(drafts, func(d Draft) string { return d.Template }),
		"payloads":  payloads,
		"lead_ids":  jobcontract.Column(drafts, func(d Draft) int64 { return d.LeadID }),
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
RETURNING d.id, d.attempts, d.provider, d.channel, d."to", d.template, d.payload,
    (SELECT deployment_id::text FROM scheduler_identity) AS deployment_id`

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
// (lock prefix '<name>:delivery', name being the job's): it re-claims and hands to out those the pipeline's
// sender may send again, and marks the others FAILED. Counts: Detail "orphan_resent" and
// "orphan_failed" (also counted in Errors).
func (p *Pipeline) Reclaim(ctx context.Context, env *jobcontract.Env, out *Outbox, name string, templates []string,
	claimTimeout time.Duration) (jobcontract.Stats, error) {
	w := &jobcontract.Walk[orphan]{
		Job:       name + ":delivery",
		BatchSize: 500,
		Read:      orphansSQL,
		Args:      pgx.NamedArgs{"templates": templates, "claim_timeout": claimTimeout},
		Start: pgx.NamedArgs{
			"after_at": pgtype.Timestamptz{InfinityModifier: pgtype.NegativeInfinity, Valid: true}, "after_id": int64(0),
		},
		Keyset: func(o orphan) pgx.NamedArgs { return pgx.NamedArgs{"after_at": o.ClaimedAt, "after_id": o.ID} },
		Lock:   func(o orphan) int64 { return o.ID },
		Apply: func(ctx context.Context, b *jobcontract.Batch[orphan]) error {
			args := pgx.NamedArgs{
				"ids":         jobcontract.Column(b.Rows, func(o orphan) int64 { return o.ID }),
				"claimed_ats": jobcontract.Column(b.Rows, func(o orphan) pgtype.Timestamptz { return o.ClaimedAt }),
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
			sendOnCommit(b, out, msgs)
			return nil
		},
	}
	return w.Run(ctx, env)
}
