package jobs

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/schedulerhq/scheduler/internal/jobcontract"
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
// submit it within the delay, through the message pipeline (messages.go), which sends each
// message at most once.
//
// Each batch of due leads is walked (walk.go): each lead is try-locked, marked abandoned
// (guarded: not submitted, not yet claimed) and its message claimed, in one fenced
// transaction; the pipeline then sends the claimed messages concurrently and records their
// outcomes, and a SENT message stamps its lead's recovery_sent_at. A claim given back
// unsent (the run was cancelled first) unmarks its lead, so the next run claims it afresh.
//
// A crash (or a deposed leader) between claim and record leaves a PENDING row whose outcome
// is unknown: the message may or may not have gone out. Once its claim is older than
// ClaimTimeout the rule is: if the row's provider is the current sender's and that sender is
// Idempotent (the webhook sender: the receiver de-duplicates on the delivery's
// Idempotency-Key), it is re-claimed and sent again under the same key, so the receiver
// delivers it once; otherwise it is marked FAILED ("outcome unknown after crash") and never
// resent, because a possible duplicate is worse than a missing reminder.
type AbandonRecovery struct {
	s    AbandonSettings
	pipe *Pipeline
}

// NewAbandonRecovery returns the abandon-recovery job, sending through pipe; zero settings
// take the defaults.
func NewAbandonRecovery(s AbandonSettings, pipe *Pipeline) jobcontract.Job {
	if s.Delay <= 0 {
		s.Delay = abandonDelayDefault
	}
	if s.ClaimTimeout <= 0 {
		s.ClaimTimeout = abandonClaimTimeoutDefault
	}
	if s.BatchSize <= 0 {
		s.BatchSize = abandonBatchSizeDefault
	}
	return &AbandonRecovery{s: s, pipe: pipe}
}

func (*AbandonRecovery) Name() string { return "abandon-recovery" }

func (*AbandonRecovery) Defaults() jobcontract.Defaults {
	return jobcontract.Defaults{Schedule: "*/15 * * * *", Timeout: 10 * time.Minute}
}

// abandonedLead is a lead due a recovery message.
type abandonedLead struct {
	ID        int64
	FormID    int64
	FormName  string
	Channel   string
	StartedAt time.Time
	To        string
}

// abandonedLeadsSQL reads the next unclaimed leads started before @cutoff, in keyset order
// along leads_unclaimed_started_idx.
const abandonedLeadsSQL = `
SELECT l.id, l.form_id, f.name, l.channel, l.started_at,
       CASE l.channel WHEN 'EMAIL' THEN l.email ELSE l.phone END
FROM leads l
JOIN forms f ON f.id = l.form_id
WHERE l.submitted_at IS NULL AND l.abandoned_at IS NULL
  AND l.started_at <= @cutoff
  AND (l.started_at, l.id) > (@after_at, @after_id)
ORDER BY l.started_at, l.id
LIMIT @limit`

// markAbandonedSQL marks the locked leads abandoned. Guard: still not submitted and not
// claimed by another run since the batch read them.
const markAbandonedSQL = `
UPDATE leads
SET abandoned_at = @now
WHERE id = ANY(@ids) AND submitted_at IS NULL AND abandoned_at IS NULL
RETURNING id`

// stampSentSQL records on the leads of sent messages that their recovery went out.
const stampSentSQL = `
UPDATE leads l
SET recovery_sent_at = now()
FROM message_deliveries d
WHERE d.id = ANY(@ids) AND l.id = d.lead_id AND d.status = 'SENT' AND l.recovery_sent_at IS NULL`

// unmarkReleasedSQL unmarks the leads of claims given back unsent, so that the next run
// claims them again.
const unmarkReleasedSQL = `
UPDATE leads l
SET abandoned_at = NULL
FROM message_deliveries d
WHERE d.id = ANY(@ids) AND l.id = d.lead_id AND l.recovery_sent_at IS NULL`

// Run settles orphaned claims, then claims and sends the recovery messages of the leads
// abandoned before now - Delay. A dry run counts the messages it would send, claims and
// sends nothing.
func (j *AbandonRecovery) Run(ctx context.Context, env *jobcontract.Env) (st jobcontract.Stats, err error) {
	out := j.pipe.Open(ctx, env, Hooks{
		OnSent: func(ctx context.Context, tx pgx.Tx, sent []Message) error {
			_, err := tx.Exec(ctx, stampSentSQL, pgx.NamedArgs{"ids": deliveryIDs(sent)})
			return err
		},
		OnRelease: func(ctx context.Context, tx pgx.Tx, released []Message) error {
			_, err := tx.Exec(ctx, unmarkReleasedSQL, pgx.NamedArgs{"ids": deliveryIDs(released)})
			return err
		},
	})
	defer func() {
		sent, closeErr := out.Close()
		st.Add(sent)
		err = errors.Join(err, closeErr)
		env.Log.Info("abandoned leads recovered", "processed", st.Processed, "sent", st.Detail["sent"],
			"failed", st.Detail["failed"], "skipped_locked", st.SkippedLocked, "dry_run", env.Params.DryRun)
	}()

	orphans, err := j.pipe.Reclaim(ctx, env, out, j.Name(), []string{RecoveryTemplate}, j.s.ClaimTimeout)
	st.Add(orphans)
	if err != nil {
		return st, fmt.Errorf("settle orphaned claims: %w", err)
	}
	claims, err := (&jobcontract.Walk[abandonedLead]{
		Job:       j.Name(),
		BatchSize: j.s.BatchSize,
		Read:      abandonedLeadsSQL,
		Args:      pgx.NamedArgs{"cutoff": env.Now.Add(-j.s.Delay)},
		Start:     pgx.NamedArgs{"after_at": time.Time{}, "after_id": int64(0)},
		Keyset: func(l abandonedLead) pgx.NamedArgs {
			return pgx.NamedArgs{"after_at": l.StartedAt, "after_id": l.ID}
		},
		Lock:  func(l abandonedLead) int64 { return l.ID },
		Apply: func(ctx context.Context, b *jobcontract.Batch[abandonedLead]) error { return j.claim(ctx, env, b, out) },
	}).Run(ctx, env)
	st.Add(claims)
	if err != nil {
		return st, fmt.Errorf("claim abandoned leads: %w", err)
	}
	return st, nil
}

// claim marks the batch's locked leads abandoned and claims their messages, which go to out
// once the batch has committed.
func (j *AbandonRecovery) claim(ctx context.Context, env *jobcontract.Env, b *jobcontract.Batch[abandonedLead], out *Outbox) error {
	rows, err := b.Tx.Query(ctx, markAbandonedSQL, pgx.NamedArgs{
		"now": env.Now, "ids": jobcontract.Column(b.Rows, func(l abandonedLead) int64 { return l.ID }),
	})
	if err != nil {
		return err
	}
	marked, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return err
	}
	// Locked but refused by the guard: submitted or claimed by another run meanwhile.
	b.CountStale(int64(len(marked)))
	isMarked := make(map[int64]bool, len(marked))
	for _, id := range marked {
		isMarked[id] = true
	}
	var drafts []Draft
	for _, l := range b.Rows {
		if !isMarked[l.ID] {
			continue
		}
		drafts = append(drafts, Draft{
			Channel: l.Channel, To: l.To, Template: RecoveryTemplate, LeadID: l.ID,
			Payload: map[string]any{"template": RecoveryTemplate, "lead_id": l.ID, "form_id": l.FormID, "form_name": l.FormName},
		})
	}
	msgs, err := j.pipe.Claim(ctx, b.Tx, drafts)
	if err != nil {
		return err
	}
	b.Stats.Count("claimed", int64(len(msgs)))
	// Marked abandoned but the unique key already held the message: the last line of
	// defence refused a duplicate.
	if dup := len(drafts) - len(msgs); dup > 0 {
		b.Stats.Count("duplicate", int64(dup))
	}
	sendOnCommit(b, out, msgs)
	return nil
}

func deliveryIDs(msgs []Message) []int64 {
	return jobcontract.Column(msgs, func(m Message) int64 { return m.DeliveryID })
}
