package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// idempotency_keys: the HTTP API's Idempotency-Key records, and the manual trigger that
// claims one in the transaction that queues its run.
const (
	IdempotencyPending   = "PENDING"
	IdempotencyCompleted = "COMPLETED"
)

// IdempotencyRecord is a stored Idempotency-Key: the hash of the request that first used it
// and, once COMPLETED, the answer it got.
type IdempotencyRecord struct {
	Status         string
	RequestHash    string
	ResponseStatus int
	ResponseJSON   []byte
	// PendingRunID is the run a PENDING request is waiting for (0 if unknown).
	PendingRunID int64
	// Age is how long ago the key was claimed, on the database clock.
	Age time.Duration
}

// claimIdempotencyKey makes the caller the owner of (key, scope), or returns the record of
// the request that owns it. It must run in the transaction that performs the request's
// effect: a concurrent request with the same key blocks on the unique (key, scope) index
// until that transaction ends, then sees its committed record, so one effect happens and
// every duplicate answers from the record. A key whose record expired (expires_at passed) is
// claimed again, as if new.
func (q queries) claimIdempotencyKey(ctx context.Context, key, scope, requestHash string, ttl time.Duration) (claimed bool, existing *IdempotencyRecord, err error) {
	var id int64
	err = q.q.QueryRow(ctx, `
		INSERT INTO idempotency_keys (key, scope, request_hash, expires_at)
		VALUES ($1::uuid, $2, $3, now() + $4::int8 * interval '1 microsecond')
		ON CONFLICT (key, scope) DO UPDATE
			SET request_hash = EXCLUDED.request_hash, status = 'PENDING', response_status = NULL,
			    response_json = NULL, created_at = now(), expires_at = EXCLUDED.expires_at
			WHERE idempotency_keys.expires_at <= now()
		RETURNING id`, key, scope, requestHash, ttl.Microseconds()).Scan(&id)
	if err == nil {
		return true, nil, nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return false, nil, fmt.Errorf("claim idempotency key %s: %w", key, err)
	}
	// READ COMMITTED: this statement's snapshot includes the owner's committed record.
	var rec IdempotencyRecord
	var status *int
	var pendingRunID *int64
	var ageMicros int64
	err = q.q.QueryRow(ctx, `
		SELECT status, request_hash, response_status, response_json,
		       CASE WHEN status = 'PENDING' THEN (response_json ->> 'run_id')::int8 END,
		       (extract(epoch FROM now() - created_at) * 1e6)::int8
		FROM idempotency_keys WHERE key = $1::uuid AND scope = $2`, key, scope).
		Scan(&rec.Status, &rec.RequestHash, &status, &rec.ResponseJSON, &pendingRunID, &ageMicros)
	if err != nil {
		return false, nil, fmt.Errorf("read idempotency key %s: %w", key, err)
	}
	if status != nil {
		rec.ResponseStatus = *status
	}
	if pendingRunID != nil {
		rec.PendingRunID = *pendingRunID
	}
	rec.Age = time.Duration(ageMicros) * time.Microsecond
	return false, &rec, nil
}

// CompleteIdempotencyKey stores the answer given to the request that claimed (key, scope).
func (q queries) CompleteIdempotencyKey(ctx context.Context, key, scope string, status int, body []byte) error {
	_, err := q.q.Exec(ctx, `
		UPDATE idempotency_keys SET status = 'COMPLETED', response_status = $3, response_json = $4
		WHERE key = $1::uuid AND scope = $2`, key, scope, status, body)
	if err != nil {
		return fmt.Errorf("store the answer of idempotency key %s: %w", key, err)
	}
	return nil
}

// noteIdempotencyRun records, on a key that stays PENDING while its request waits, which run
// the request created, so a duplicate can still answer with that run if the waiting replica
// died before storing its answer.
func (q queries) noteIdempotencyRun(ctx context.Context, key, scope string, runID int64) error {
	_, err := q.q.Exec(ctx, `
		UPDATE idempotency_keys SET response_json = jsonb_build_object('run_id', $3::int8)
		WHERE key = $1::uuid AND scope = $2 AND status = 'PENDING'`, key, scope, runID)
	if err != nil {
		return fmt.Errorf("note the run of idempotency key %s: %w", key, err)
	}
	return nil
}

// ManualTrigger asks for a manual run of Job, optionally under an Idempotency-Key.
type ManualTrigger struct {
	Job    string
	Reason *string
	Params []byte
	// Traceparent is the request's W3C trace context, checked (tracing.Traceparent), kept
	// with the run so the leader's run joins the caller's trace; "" for none.
	Traceparent string

	// Key is the request's Idempotency-Key ("" for none). Scope names what the key is for
	// (the route and job); RequestHash fingerprints the request body, so the same key with
	// another body is refused; the key is kept for TTL.
	Key         string
	Scope       string
	RequestHash string
	TTL         time.Duration
	// Wait keeps the key PENDING, with the run noted on it, for a request that waits for the
	// run to finish: its caller stores the final answer with CompleteIdempotencyKey.
	Wait bool
	// Answer renders the answer stored with the key (when !Wait): the HTTP status and body
	// the request gets, and every duplicate replays.
	Answer func(run *Run, created bool) (status int, body []byte)
	// Audit, when set, is recorded with the run's id in the transaction that queues the run
	// (or finds the job's active one), so no trigger goes unaudited.
	Audit *Action
	// Refuse, when set, says whether the job's active run (met instead of queuing one) does
	// not answer this trigger, e.g. it has other inputs: then nothing is kept (no run, no
	// audit row, the key left unused for a retry) and Triggered.Refused is set.
	Refuse func(active *Run) bool
}

// Triggered is what TriggerManualRun did: either it queued (Created) or found the job's
// active Run, or the key was already used and Existing is its record (Run is nil).
type Triggered struct {
	Run     *Run
	Created bool
	// Answer is the stored answer (a key, not Wait).
	Answer   []byte
	Existing *IdempotencyRecord
	// Refused says the trigger met an active Run that Refuse refused; nothing was kept.
	Refused bool
}

// errRefused rolls back a trigger that ManualTrigger.Refuse refused.
var errRefused = errors.New("the active run does not answer this trigger")

// TriggerManualRun queues a manual run of t.Job (QueueManualRun: the job's active run is
// answered instead of a second one) and records t.Audit, in one transaction. With a key, the
// idempotent-trigger protocol runs in that transaction too: claim the key, queue the run,
// then note the run on the key (t.Wait) or store its answer, which the caller renders
// (t.Answer) inside the transaction on purpose: a concurrent duplicate blocks on the key's
// unique index until this commits and then replays that very answer, so one run is queued
// for every key and every copy gets the first answer; nothing of a failed attempt stays
// behind.
func (db *DB) TriggerManualRun(ctx context.Context, t ManualTrigger) (Triggered, error) {
	var out Triggered
	err := pgx.BeginFunc(ctx, db.pool, func(ptx pgx.Tx) error {
		out = Triggered{}
		q := queries{ptx}
		if t.Key != "" {
			claimed, rec, err := q.claimIdempotencyKey(ctx, t.Key, t.Scope, t.RequestHash, t.TTL)
			if err != nil || !claimed {
				out.Existing = rec
				return err
			}
		}
		var err error
		if out.Run, out.Created, err = q.queueManualRun(ctx, t.Job, t.Reason, t.Params, t.Traceparent); err != nil {
			return err
		}
		if !out.Created && t.Refuse != nil && t.Refuse(out.Run) {
			out.Refused = true
			return errRefused
		}
		if t.Audit != nil {
			a := *t.Audit
			a.RunID = &out.Run.ID
			if err := q.RecordAction(ctx, a); err != nil {
				return err
			}
		}
		switch {
		case t.Key == "":
			return nil
		case t.Wait:
			return q.noteIdempotencyRun(ctx, t.Key, t.Scope, out.Run.ID)
		}
		var status int
		status, out.Answer = t.Answer(out.Run, out.Created)
		return q.CompleteIdempotencyKey(ctx, t.Key, t.Scope, status, out.Answer)
	})
	switch {
	case errors.Is(err, errRefused):
		return Triggered{Run: out.Run, Refused: true}, nil
	case err != nil:
		return Triggered{}, err
	}
	return out, nil
}
