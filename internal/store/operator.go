package store

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
)

// Operator actions (the audit log) and the step-down request.

// Action is one row of operator_actions.
type Action struct {
	ID        int64
	At        time.Time
	Action    string // trigger, cancel, pause, resume, step-down, refused
	Job       *string
	RunID     *int64
	TokenKind string
	// TokenID and TokenName name the credential that acted; Namespace is the namespace it
	// acted in (nil for the cluster's own: leadership, tokens).
	TokenID    *string
	TokenName  *string
	Namespace  *string
	Reason     *string
	RequestID  string
	RemoteAddr string
	// Detail is a definition change's before and after ({"before": ..., "after": ...}), or
	// nil.
	Detail json.RawMessage
}

// Operator action names.
const (
	ActionTrigger  = "trigger"
	ActionCancel   = "cancel"
	ActionPause    = "pause"
	ActionResume   = "resume"
	ActionStepDown = "step-down"
	// ActionRefused is a request refused for its credentials or origin (401, 403).
	ActionRefused = "refused"
	// Runtime job definitions: created, replaced, deleted; and a job the engine paused after
	// its failed runs in a row.
	ActionCreate    = "create"
	ActionUpdate    = "update"
	ActionDelete    = "delete"
	ActionAutoPause = "auto-pause"
	// ActionFailover is a term that found the database failed over and repaired the slots
	// of a window before its election (detail: the window).
	ActionFailover = "failover"
	// Teams (migration 0017): a namespace created or its quotas set, a token made or
	// revoked, a secret stored or deleted.
	ActionNamespace    = "namespace"
	ActionTokenCreate  = "token-create"
	ActionTokenRevoke  = "token-revoke"
	ActionSecretPut    = "secret-put"
	ActionSecretDelete = "secret-delete"
	// A slot run again (migration 0018): a re-run, a backfill asked for or cancelled.
	ActionRerun          = "rerun"
	ActionBackfill       = "backfill"
	ActionBackfillCancel = "backfill-cancel"
	// ActionOIDCRotate is a rotation of the targets' token signing keys asked by an admin.
	ActionOIDCRotate = "oidc-rotate"
	// ActionDrain is a replica asked to give up its partitions (migration 0029).
	ActionDrain = "drain"
)

const insertActionSQL = `
INSERT INTO operator_actions (action, job, run_id, token_kind, reason, request_id, remote_addr, detail,
                              token_id, token_name, namespace)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)`

// RecordAction appends a to the audit log.
func (q queries) RecordAction(ctx context.Context, a Action) error {
	_, err := q.q.Exec(ctx, insertActionSQL, a.Action, a.Job, a.RunID, a.TokenKind, a.Reason, a.RequestID, a.RemoteAddr, a.Detail,
		a.TokenID, a.TokenName, a.Namespace)
	if err != nil {
		return fmt.Errorf("record the %s action in operator_actions: %w", a.Action, err)
	}
	return nil
}

// ActionFilter selects the audit rows GET /v1/audit lists. Every field is optional.
type ActionFilter struct {
	BeforeID int64 // ids below it (0: from the newest)
	Limit    int
	// Namespaces: those namespaces' rows only (nil: every row, the cluster's own included).
	Namespaces []string
	// Job: rows of the job of this name, in whichever namespace (its key is the name, or
	// "<namespace>/<name>").
	Job string
	// Action: rows of this action.
	Action string
	// Token: rows of the credential with this id or name, or of this token kind (full,
	// read, token, engine...).
	Token        string
	Since, Until *time.Time
}

// listActionsSQL is one keyset page, newest first: a backward range scan of the primary key
// from the cursor, however long the log is; with namespaces, of those namespaces' rows only
// (operator_actions_namespace_idx). The other filters are checked on the rows scanned.
const listActionsSQL = `
SELECT id, at, action, job, run_id, token_kind, reason, request_id, remote_addr, detail, token_id, token_name, namespace
FROM operator_actions
WHERE id < $1 AND ($3::text[] IS NULL OR namespace = ANY($3))
  AND ($4::text IS NULL OR job = $4 OR right(job, length($4) + 1) = '/' || $4)
  AND ($5::text IS NULL OR action = $5)
  AND ($6::text IS NULL OR token_id = $6 OR token_name = $6 OR token_kind = $6)
  AND ($7::timestamptz IS NULL OR at >= $7)
  AND ($8::timestamptz IS NULL OR at < $8)
ORDER BY id DESC
LIMIT $2`

// Actions returns up to f.Limit actions that f selects, newest first.
func (q queries) Actions(ctx context.Context, f ActionFilter) ([]Action, error) {
	beforeID := f.BeforeID
	if beforeID <= 0 {
		beforeID = 1<<63 - 1
	}
	rows, err := q.q.Query(ctx, listActionsSQL, beforeID, f.Limit, f.Namespaces, nullText(f.Job), nullText(f.Action),
		nullText(f.Token), f.Since, f.Until)
	if err != nil {
		return nil, fmt.Errorf("list operator actions: %w", err)
	}
	list, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (Action, error) {
		var a Action
		err := row.Scan(&a.ID, &a.At, &a.Action, &a.Job, &a.RunID, &a.TokenKind, &a.Reason, &a.RequestID, &a.RemoteAddr, &a.Detail,
			&a.TokenID, &a.TokenName, &a.Namespace)
		return a, err
	})
	if err != nil {
		return nil, fmt.Errorf("list operator actions: %w", err)
	}
	return list, nil
}

// Control messages to the leader (scheduler_control, migration 0014). Any login can NOTIFY
// any channel, so a notification only wakes the leader: it acts on a row of
// scheduler_control for its epoch, which only the scheduler's login can write, and which the
// API writes in the transaction of its audit row (docs/design.md guarantee 12).

// StepDownChannel is the NOTIFY channel that wakes the leader to read its step-down rows.
// The payload is the epoch the row names, so a leader skips notifications for other terms
// without reading anything; it is only a hint.
const StepDownChannel = "scheduler_leader_step_down"

// Control message kinds.
const ControlStepDown = "step-down"

// ControlRequest says who asks, as the request's audit row does.
type ControlRequest struct {
	TokenKind string
	Reason    *string
	RequestID string
}

// ControlMessage is a row of scheduler_control that a leader acted on.
type ControlMessage struct {
	ID    int64
	Kind  string
	Epoch int64
	ControlRequest
	CreatedAt time.Time
}

// leaderNowCTEs name the leader row (leader) and whether its lock is held right now
// (lock_held), for a WITH: the row outlives a crashed leader until the next election, so
// the row alone would name a dead replica.
const leaderNowCTEs = `
leader AS (
    SELECT epoch, instance_id, since FROM scheduler_leader WHERE id = 1
),
lock_held AS (
    SELECT EXISTS (SELECT FROM pg_locks l WHERE ` + isLeaderLock + ` AND l.granted) AS held
)`

// currentLeaderSQL reads the leader row, and whether its lock is held right now: a request
// to a dead leader would be answered 202 and do nothing.
const currentLeaderSQL = `WITH ` + leaderNowCTEs + `
SELECT leader.epoch, coalesce(leader.instance_id, ''), coalesce(leader.since, now()), lock_held.held
FROM leader, lock_held`

// requestStepDownSQL writes the step-down row for the epoch and wakes the leader; the
// NOTIFY is delivered when the transaction commits, so the row is there when it reads.
const requestStepDownSQL = `
WITH request AS (
    INSERT INTO scheduler_control (kind, epoch, token_kind, reason, request_id)
    VALUES ('` + ControlStepDown + `', $1, $2, $3, $4)
    RETURNING epoch
)
SELECT pg_notify('` + StepDownChannel + `', epoch::text) FROM request`

// RequestStepDown asks the current leader to resign: a row of scheduler_control naming its
// epoch, and a NOTIFY to wake it. Run it inside Atomically with the request's audit row, so
// that the leader never acts on a request that left no audit (or the reverse). It returns
// the leader asked, or ok=false when no replica leads now.
func (q queries) RequestStepDown(ctx context.Context, req ControlRequest) (l LeaderRow, ok bool, err error) {
	var held bool
	if err := q.q.QueryRow(ctx, currentLeaderSQL).Scan(&l.Epoch, &l.InstanceID, &l.Since, &held); err != nil {
		return l, false, fmt.Errorf("read the leader: %w", err)
	}
	if !held || l.InstanceID == "" {
		return l, false, nil
	}
	if _, err := q.q.Exec(ctx, requestStepDownSQL, l.Epoch, req.TokenKind, req.Reason, req.RequestID); err != nil {
		return l, false, fmt.Errorf("write the step-down request: %w", err)
	}
	return l, true, nil
}

// TakeStepDown marks the pending step-down rows for epoch handled by instanceID and returns
// them, oldest first; none means the notification that woke the leader was not the API's.
func (s *LockSession) TakeStepDown(ctx context.Context, epoch int64, instanceID string) ([]ControlMessage, error) {
	const take = `
		UPDATE scheduler_control SET handled_at = clock_timestamp(), handled_by = $3
		WHERE epoch = $1 AND kind = $2 AND handled_at IS NULL
		RETURNING id, kind, epoch, token_kind, reason, request_id, created_at`
	rows, err := s.conn.Query(ctx, take, epoch, ControlStepDown, instanceID)
	if err != nil {
		return nil, fmt.Errorf("read the step-down requests: %w", err)
	}
	msgs, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (ControlMessage, error) {
		var m ControlMessage
		err := row.Scan(&m.ID, &m.Kind, &m.Epoch, &m.TokenKind, &m.Reason, &m.RequestID, &m.CreatedAt)
		return m, err
	})
	if err != nil {
		return nil, fmt.Errorf("read the step-down requests: %w", err)
	}
	slices.SortFunc(msgs, func(a, b ControlMessage) int { return cmp.Compare(a.ID, b.ID) })
	return msgs, nil
}

// nullText is s, or NULL when s is empty.
func nullText(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}
