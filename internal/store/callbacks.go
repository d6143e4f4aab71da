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

// expiringCallbacksSQL picks, and locks, the accepted runs whose cancellation was asked for
// (cancelled), whose heartbeats stopped or whose deadline passed (timed_out), by the
// database's clock ($1, nil but in tests: nowSQL), with the end each gets.
const expiringCallbacksSQL = `
SELECT id,
       CASE WHEN cancel_requested THEN 'cancelled' ELSE 'timed_out' END,
       CASE
           WHEN cancel_requested THEN 'cancelled while waiting for the target''s completion'
           WHEN coalesce($1::timestamptz, now()) >= callback_deadline THEN 'timed out: the target did not complete the run within the job''s timeout'
           ELSE 'timed out: no heartbeat from the target within ' || callback_heartbeat_timeout::text END
FROM job_runs` + expiringCallbacksWhere + `
ORDER BY id -- locks taken in one order by every statement that ends several runs
FOR UPDATE`

// expiringCallbacksWhere picks the accepted callback runs of partition $2 due to end by $1.
const expiringCallbacksWhere = `
WHERE status = 'running' AND callback_accepted_at IS NOT NULL AND partition_id = $2
  AND (cancel_requested OR coalesce($1::timestamptz, now()) >= callback_deadline
       OR coalesce($1::timestamptz, now()) >= callback_heartbeat_at + callback_heartbeat_timeout)`

// CallbacksExpiring reports, outside any fence, whether partition has callback runs due to
// end by now: the callback watch of every partition looks each second, and most seconds
// there are none, which one read tells without a fenced transaction's four round trips.
func (q queries) CallbacksExpiring(ctx context.Context, now *time.Time, partition int) (bool, error) {
	var due bool
	err := q.q.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM job_runs`+expiringCallbacksWhere+`)`, now, partition).Scan(&due)
	if err != nil {
		return false, fmt.Errorf("look for expired callback runs: %w", err)
	}
	return due, nil
}

// ExpireCallbacks ends, in the leader's fenced transaction, the accepted callback runs of its
// partition that were cancelled, went without a heartbeat too long, or reached their deadline, by now (nil
// but in tests: the database's clock), which is also their end's time.
func (tx *Tx) ExpireCallbacks(ctx context.Context, now *time.Time) ([]Ended, error) {
	rows, err := tx.Query(ctx, expiringCallbacksSQL, now, tx.partition)
	if err != nil {
		return nil, fmt.Errorf("end expired callback runs: %w", err)
	}
	ends, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (Finish, error) {
		var f Finish
		err := row.Scan(&f.RunID, &f.Status, &f.Error)
		return f, err
	})
	if err != nil {
		return nil, fmt.Errorf("end expired callback runs: %w", err)
	}
	return tx.endRuns(ctx, now, ends)
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
// replica: the end of a run its token names, from running, so a repeat finds the run ended
// (CallbackRepeated, or CallbackConflict for another outcome). ended, called in the same
// transaction with the Executor on it, records what the end means (internal/runend); its
// error rolls the end back. run is the run as it was found.
func (db *DB) CompleteCallback(ctx context.Context, c Completion, ended func(ex Executor, x Ended) error) (out CallbackOutcome, run *Run, err error) {
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
		q := queries{tx}
		done, err := q.endRuns(ctx, nil, []Finish{{RunID: c.RunID, Status: c.Status, Error: errText, Output: c.Output}})
		if err != nil {
			return fmt.Errorf("complete run %d: %w", c.RunID, err)
		}
		if len(done) != 1 { // the row lock held since the token check: cannot happen
			return fmt.Errorf("complete run %d: %w", c.RunID, ErrNotRunning)
		}
		out = CallbackDone
		return ended(q, done[0])
	})
	return out, run, err
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
