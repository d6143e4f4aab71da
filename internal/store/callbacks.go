package store

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// Completion by callback (issue 33, migration 0020): the run of an HTTP job whose definition
// says "completion": "callback" stays running once its target accepted the call, until the
// target posts the outcome (CompleteCallback, on any replica), its heartbeats stop, or its
// deadline passes (ExpireCallbacks, on the leader).

// CallbackTokenHash is what job_runs keeps of a run's callback token.
func CallbackTokenHash(token string) []byte {
	h := sha256.Sum256([]byte(token))
	return h[:]
}

// ArmCallback stores the hash of the run's callback token before the call is made, so a
// target that completes before the acceptance is recorded is still recognised.
func (tx *Tx) ArmCallback(ctx context.Context, runID int64, tokenHash []byte) error {
	tag, err := tx.Exec(ctx, `UPDATE job_runs SET callback_token_hash = $2 WHERE id = $1 AND status = 'running'`, runID, tokenHash)
	if err != nil {
		return fmt.Errorf("store run %d's callback token: %w", runID, err)
	}
	if tag.RowsAffected() == 0 {
		return ErrNotRunning
	}
	return nil
}

// Accept is a callback run whose target accepted the call.
type Accept struct {
	RunID            int64
	Stats            json.RawMessage
	Version          *int64
	Attempts         []Attempt // the accepting attempt, recorded with the acceptance
	HeartbeatTimeout time.Duration
	Deadline         time.Time
}

// AcceptCallback marks a callback run accepted, inside the leader's fenced transaction: from
// then on the rescuer leaves it alone and the watcher ends it. It reports false when the run
// is no longer running (its completion came first).
func (tx *Tx) AcceptCallback(ctx context.Context, a Accept) (bool, error) {
	if len(a.Attempts) > 0 {
		runs := make([]int64, len(a.Attempts))
		for i := range runs {
			runs[i] = a.RunID
		}
		if err := tx.recordAttempts(ctx, runs, a.Attempts); err != nil {
			return false, err
		}
	}
	tag, err := tx.Exec(ctx, `
		UPDATE job_runs
		SET callback_accepted_at = now(), callback_heartbeat_at = now(),
		    callback_heartbeat_timeout = make_interval(secs => $2), callback_deadline = $3,
		    stats = $4, definition_version = coalesce($5, definition_version)
		WHERE id = $1 AND status = 'running'`,
		a.RunID, a.HeartbeatTimeout.Seconds(), a.Deadline, a.Stats, a.Version)
	if err != nil {
		return false, fmt.Errorf("record run %d accepted: %w", a.RunID, err)
	}
	return tag.RowsAffected() == 1, nil
}

// Expired is an accepted callback run the watcher ended.
type Expired struct {
	ID      int64
	Job     string
	Trigger string
	Status  string
}

// expireCallbacksSQL ends the accepted runs whose cancellation was asked for (cancelled),
// whose heartbeats stopped or whose deadline passed (timed_out), by the database's clock.
const expireCallbacksSQL = `
WITH ended AS (
	UPDATE job_runs
	SET status = CASE WHEN cancel_requested THEN 'cancelled' ELSE 'timed_out' END,
	    finished_at = now(),
	    error = CASE
	        WHEN cancel_requested THEN 'cancelled while waiting for the target''s completion'
	        WHEN now() >= callback_deadline THEN 'timed out: the target did not complete the run within the job''s timeout'
	        ELSE 'timed out: no heartbeat from the target within ' || callback_heartbeat_timeout::text END
	WHERE status = 'running' AND callback_accepted_at IS NOT NULL
	  AND (cancel_requested OR now() >= callback_deadline
	       OR now() >= callback_heartbeat_at + callback_heartbeat_timeout)
	RETURNING id, job, trigger, status
)
SELECT id, job, trigger, status, pg_notify('` + RunFinishedChannel + `', id::text) IS NULL FROM ended`

// ExpireCallbacks ends, in the leader's fenced transaction, the accepted callback runs that
// were cancelled, went without a heartbeat too long, or reached their deadline.
func (tx *Tx) ExpireCallbacks(ctx context.Context) ([]Expired, error) {
	rows, err := tx.Query(ctx, expireCallbacksSQL)
	if err != nil {
		return nil, fmt.Errorf("end expired callback runs: %w", err)
	}
	out, err := pgx.CollectRows(rows, scanEnded)
	if err != nil {
		return nil, fmt.Errorf("end expired callback runs: %w", err)
	}
	return out, nil
}

// scanEnded reads a run ended by a statement that returns its id, job, trigger and status,
// and the announcement of its end.
func scanEnded(row pgx.CollectableRow) (Expired, error) {
	var x Expired
	var ignored bool
	err := row.Scan(&x.ID, &x.Job, &x.Trigger, &x.Status, &ignored)
	return x, err
}

// CallbackOutcome says what a completion or a heartbeat did.
type CallbackOutcome int

const (
	// CallbackRefused: no run has that id, it is no callback run, or the token is not its.
	CallbackRefused CallbackOutcome = iota + 1
	// CallbackDone: the completion ended the run, or the heartbeat was recorded.
	CallbackDone
	// CallbackRepeated: the run already ended with the outcome the completion reports.
	CallbackRepeated
	// CallbackConflict: the run already ended otherwise (another outcome, a timeout, a
	// cancel), or a heartbeat came for a finished run.
	CallbackConflict
)

// Completion is what a target reports at the end of a callback run.
type Completion struct {
	RunID     int64
	TokenHash []byte
	Status    string  // StatusSucceeded or StatusFailed
	Output    *string // already bounded by the caller
}

// checkCallbackToken reads the run's callback state under its row lock and compares the
// token, in constant time, with the hash stored.
func checkCallbackToken(ctx context.Context, tx pgx.Tx, id int64, hash []byte) (run *Run, ok bool, err error) {
	var stored []byte
	run = &Run{}
	err = tx.QueryRow(ctx, `SELECT id, job, trigger, status, callback_token_hash FROM job_runs WHERE id = $1 FOR UPDATE`, id).
		Scan(&run.ID, &run.Job, &run.Trigger, &run.Status, &stored)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("read run %d: %w", id, err)
	}
	if len(stored) == 0 || subtle.ConstantTimeCompare(stored, hash) != 1 {
		return nil, false, nil
	}
	return run, true, nil
}

// CompleteCallback ends a running callback run with the target's outcome, once, on any
// replica: a guarded UPDATE of a row its token names, so a repeat finds the run ended
// (CallbackRepeated, or CallbackConflict for another outcome). A failed completion counts
// for the job's pause_after_failures in the same transaction, as the leader's auto-pause
// does (engine/run.go), with its audit row. run is the run as it was found.
func (db *DB) CompleteCallback(ctx context.Context, c Completion, instance string) (out CallbackOutcome, run *Run, paused bool, err error) {
	err = pgx.BeginFunc(ctx, db.pool, func(tx pgx.Tx) error {
		var ok bool
		run, ok, err = checkCallbackToken(ctx, tx, c.RunID, c.TokenHash)
		switch {
		case err != nil:
			return err
		case !ok:
			out = CallbackRefused
			return nil
		case run.Status != StatusRunning:
			out = CallbackConflict
			if run.Status == c.Status {
				out = CallbackRepeated
			}
			return nil
		}
		var errText *string
		if c.Status == StatusFailed {
			s := "the target reported the run failed"
			errText = &s
		}
		if _, err := tx.Exec(ctx, `
			UPDATE job_runs SET status = $2, finished_at = now(), error = $4,
			       stats = CASE WHEN $3::text IS NULL THEN stats ELSE coalesce(stats, '{}') || jsonb_build_object('output', $3::text) END
			WHERE id = $1 AND status = 'running'`, c.RunID, c.Status, c.Output, errText); err != nil {
			return fmt.Errorf("complete run %d: %w", c.RunID, err)
		}
		if _, err := tx.Exec(ctx, `SELECT pg_notify('`+RunFinishedChannel+`', $1::bigint::text)`, c.RunID); err != nil {
			return fmt.Errorf("announce run %d's end: %w", c.RunID, err)
		}
		out = CallbackDone
		var after int
		if c.Status == StatusFailed {
			if paused, after, err = pauseAfterFailures(ctx, queries{tx}, run, instance); err != nil {
				return err
			}
		}
		return completionEvents(ctx, queries{tx}, run, c.Status, after)
	})
	return out, run, paused, err
}

// pauseAfterFailures pauses a runtime job whose pause_after_failures last runs all failed,
// with its auto-pause audit row, inside the caller's transaction; after is that number.
func pauseAfterFailures(ctx context.Context, q queries, run *Run, instance string) (paused bool, after int, err error) {
	var n int
	err = q.q.QueryRow(ctx, `SELECT coalesce((definition->>'pause_after_failures')::int, 0) FROM job_definitions WHERE name = $1`, run.Job).Scan(&n)
	if errors.Is(err, pgx.ErrNoRows) || (err == nil && n <= 0) {
		return false, 0, nil
	}
	if err != nil {
		return false, 0, fmt.Errorf("read %s's pause_after_failures: %w", run.Job, err)
	}
	failing, err := q.ConsecutiveFailures(ctx, run.Job, n)
	if err != nil || !failing {
		return false, 0, err
	}
	if err := q.SetPaused(ctx, run.Job, true); err != nil {
		return false, 0, err
	}
	job, runID := run.Job, run.ID
	reason := fmt.Sprintf("paused after %d failed runs in a row (pause_after_failures); resume it once the target works", n)
	return true, n, q.RecordAction(ctx, Action{Action: ActionAutoPause, Job: &job, RunID: &runID,
		TokenKind: "engine", Reason: &reason, RequestID: fmt.Sprintf("run-%d", run.ID), RemoteAddr: instance})
}

// HeartbeatCallback records that the target still works on a running callback run.
func (db *DB) HeartbeatCallback(ctx context.Context, id int64, tokenHash []byte) (out CallbackOutcome, err error) {
	err = pgx.BeginFunc(ctx, db.pool, func(tx pgx.Tx) error {
		run, ok, err := checkCallbackToken(ctx, tx, id, tokenHash)
		switch {
		case err != nil:
			return err
		case !ok:
			out = CallbackRefused
			return nil
		case run.Status != StatusRunning:
			out = CallbackConflict
			return nil
		}
		if _, err := tx.Exec(ctx, `UPDATE job_runs SET callback_heartbeat_at = now() WHERE id = $1`, id); err != nil {
			return fmt.Errorf("record run %d's heartbeat: %w", id, err)
		}
		out = CallbackDone
		return nil
	})
	return out, err
}

// RunOutput is the output a callback run's completion reported (nil when none), which
// CompleteCallback keeps in the run's stats.
func (q queries) RunOutput(ctx context.Context, id int64) (*string, error) {
	var out *string
	err := q.q.QueryRow(ctx, `SELECT stats->>'output' FROM job_runs WHERE id = $1`, id).Scan(&out)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("read run %d's output: %w", id, err)
	}
	return out, nil
}
