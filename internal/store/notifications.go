package store

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// The jobs' notifications (migration 0019): events written with the facts they report, and
// the deliveries the leader makes of them (docs/design.md, "Notifications to teams").

// NotificationEvent is one event to record: a run's (RunID) or a pause's without a run
// (RunID 0), with the pause's reason in Detail.
type NotificationEvent struct {
	Job    string
	Event  string
	RunID  int64
	Detail *string
}

// recordNotificationsSQL inserts the events, each with a snapshot of its run as it is in
// this transaction (the fact's own), and leaves an event already recorded alone: one per
// (run, event) is the guarantee, and the unique index its last line of defence.
const recordNotificationsSQL = `
INSERT INTO scheduler_notifications (job, event, run_id, scheduled_at, status, error, detail)
SELECT e.job, e.event, r.id, r.scheduled_at, r.status, left(r.error, 4000), e.detail
FROM unnest($1::text[], $2::text[], $3::bigint[], $4::text[]) AS e (job, event, run_id, detail)
LEFT JOIN job_runs r ON r.id = e.run_id
WHERE e.run_id IS NULL OR r.id IS NOT NULL
ON CONFLICT (run_id, event) WHERE run_id IS NOT NULL DO NOTHING`

// RecordNotifications records events in the caller's transaction: the fenced one that
// records their facts, or the API's pause. It returns how many it wrote.
func (q queries) RecordNotifications(ctx context.Context, events []NotificationEvent) (int64, error) {
	if len(events) == 0 {
		return 0, nil
	}
	jobs, kinds, runs, details := make([]string, len(events)), make([]string, len(events)), make([]*int64, len(events)), make([]*string, len(events))
	for i, e := range events {
		jobs[i], kinds[i], details[i] = e.Job, e.Event, e.Detail
		if e.RunID != 0 {
			id := e.RunID
			runs[i] = &id
		}
	}
	tag, err := q.q.Exec(ctx, recordNotificationsSQL, jobs, kinds, runs, details)
	if err != nil {
		return 0, fmt.Errorf("record %d notification events: %w", len(events), err)
	}
	return tag.RowsAffected(), nil
}

// RecoveredRuns returns the runs among ids (succeeded runs, just finished) whose job's
// outcome before them was failed, timed_out or missed: the first success after a failure.
// Skips, cancels and abandons are not outcomes; one backward probe of job_runs_job_id_idx
// per run.
func (q queries) RecoveredRuns(ctx context.Context, ids []int64) ([]int64, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	rows, err := q.q.Query(ctx, `
		SELECT r.id FROM job_runs r
		WHERE r.id = ANY($1::bigint[])
		  AND (SELECT p.status FROM job_runs p
		       WHERE p.job = r.job AND p.id < r.id AND p.status IN ('succeeded', 'failed', 'timed_out', 'missed')
		       ORDER BY p.id DESC LIMIT 1) IN ('failed', 'timed_out', 'missed')`, ids)
	if err != nil {
		return nil, fmt.Errorf("read the outcomes before %d runs: %w", len(ids), err)
	}
	return pgx.CollectRows(rows, pgx.RowTo[int64])
}

// NotificationGroup is one job's waiting events of one type.
type NotificationGroup struct {
	Job, Event string
}

// WaitingGroups lists the (job, event) whose oldest waiting event is at least interval old
// by the database's clock: their coalescing interval is over.
func (tx *Tx) WaitingGroups(ctx context.Context, interval time.Duration) ([]NotificationGroup, error) {
	rows, err := tx.Query(ctx, `
		SELECT job, event FROM scheduler_notifications WHERE grouped_at IS NULL
		GROUP BY job, event HAVING min(created_at) <= now() - $1::interval
		ORDER BY min(id)`, interval)
	if err != nil {
		return nil, fmt.Errorf("read the waiting notifications: %w", err)
	}
	return pgx.CollectRows(rows, pgx.RowToStructByPos[NotificationGroup])
}

// WaitingNotification is an event not yet in a message.
type WaitingNotification struct {
	ID          int64      `json:"-"`
	Event       string     `json:"event"`
	RunID       *int64     `json:"run_id"`
	ScheduledAt *time.Time `json:"scheduled_at"`
	Status      *string    `json:"status"`
	Error       *string    `json:"-"`
	Detail      *string    `json:"detail"`
	CreatedAt   time.Time  `json:"created_at"`
}

const waitingColumns = `id, event, run_id, scheduled_at, status, error, detail, created_at`

// TakeWaiting locks the oldest limit waiting events of g, for the transaction that groups
// them into messages (GroupNotifications).
func (tx *Tx) TakeWaiting(ctx context.Context, g NotificationGroup, limit int) ([]WaitingNotification, error) {
	rows, err := tx.Query(ctx, `SELECT `+waitingColumns+` FROM scheduler_notifications
		WHERE job = $1 AND event = $2 AND grouped_at IS NULL ORDER BY id LIMIT $3 FOR UPDATE`, g.Job, g.Event, limit)
	if err != nil {
		return nil, fmt.Errorf("read the waiting notifications of %s: %w", g.Job, err)
	}
	return pgx.CollectRows(rows, pgx.RowToStructByPos[WaitingNotification])
}

// Waiting lists a job's events not yet in a message, oldest first (the API's view).
func (q queries) Waiting(ctx context.Context, job string) ([]WaitingNotification, error) {
	rows, err := q.q.Query(ctx, `SELECT `+waitingColumns+` FROM scheduler_notifications
		WHERE job = $1 AND grouped_at IS NULL ORDER BY id LIMIT 1000`, job)
	if err != nil {
		return nil, fmt.Errorf("read the waiting notifications of %s: %w", job, err)
	}
	return pgx.CollectRows(rows, pgx.RowToStructByPos[WaitingNotification])
}

// NewDelivery is one message to one destination, for GroupNotifications.
type NewDelivery struct {
	Job, Event, Kind string
	URL, Secret      *string
	RunIDs           []int64
	Count            int
	Body             []byte
}

// GroupNotifications marks events grouped and inserts their messages, in the caller's
// fenced transaction: an event goes into one set of messages, once, and a message exists
// once the events it covers are marked (docs/design.md, "Notifications to teams").
func (tx *Tx) GroupNotifications(ctx context.Context, events []int64, deliveries []NewDelivery) error {
	if _, err := tx.Exec(ctx, `UPDATE scheduler_notifications SET grouped_at = now() WHERE id = ANY($1::bigint[])`, events); err != nil {
		return fmt.Errorf("group %d notification events: %w", len(events), err)
	}
	for _, d := range deliveries {
		if _, err := tx.Exec(ctx, `
			INSERT INTO scheduler_notification_deliveries (job, event, kind, url, secret, run_ids, count, body)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`, d.Job, d.Event, d.Kind, d.URL, d.Secret, d.RunIDs, d.Count, d.Body); err != nil {
			return fmt.Errorf("create a %s notification of %s: %w", d.Event, d.Job, err)
		}
	}
	return nil
}

// Delivery is one message to one destination and what became of it.
type Delivery struct {
	ID            int64
	Job           string
	Event         string
	WebhookID     uuid.UUID
	Kind          string
	URL, Secret   *string
	RunIDs        []int64
	Count         int
	Body          []byte
	Status        string
	Attempts      int
	NextAttemptAt time.Time
	LastStatus    *int
	LastError     *string
	CreatedAt     time.Time
	SentAt        *time.Time
}

// Delivery statuses.
const (
	DeliveryPending = "pending"
	DeliverySent    = "sent"
	DeliveryFailed  = "failed"
)

const deliveryColumns = `id, job, event, webhook_id, kind, url, secret, run_ids, count, body, status, attempts,
	next_attempt_at, last_status, last_error, created_at, sent_at`

// DueDeliveries lists up to limit pending deliveries whose next attempt is due, oldest
// first, leaving out those of the jobs in busy (a delivery of theirs is in flight).
func (q queries) DueDeliveries(ctx context.Context, limit int, busy []string) ([]Delivery, error) {
	rows, err := q.q.Query(ctx, `SELECT `+deliveryColumns+` FROM scheduler_notification_deliveries
		WHERE status = 'pending' AND next_attempt_at <= now() AND NOT job = ANY($2::text[])
		ORDER BY next_attempt_at, id LIMIT $1`, limit, busy)
	if err != nil {
		return nil, fmt.Errorf("read the due notifications: %w", err)
	}
	return pgx.CollectRows(rows, pgx.RowToStructByPos[Delivery])
}

// Deliveries lists a job's last limit deliveries, newest first (the API's view).
func (q queries) Deliveries(ctx context.Context, job string, limit int) ([]Delivery, error) {
	rows, err := q.q.Query(ctx, `SELECT `+deliveryColumns+` FROM scheduler_notification_deliveries
		WHERE job = $1 ORDER BY id DESC LIMIT $2`, job, limit)
	if err != nil {
		return nil, fmt.Errorf("read the notifications of %s: %w", job, err)
	}
	return pgx.CollectRows(rows, pgx.RowToStructByPos[Delivery])
}

// DeliveryOutcome is what one attempt of a delivery did.
type DeliveryOutcome struct {
	ID int64
	// Status is DeliverySent, DeliveryFailed (given up), or DeliveryPending with RetryIn.
	Status     string
	RetryIn    time.Duration
	LastStatus *int
	LastError  *string
}

// RecordDeliveryOutcome records an attempt of a pending delivery in the caller's fenced
// transaction; a delivery no longer pending (recorded by an earlier term) is left alone.
func (tx *Tx) RecordDeliveryOutcome(ctx context.Context, o DeliveryOutcome) error {
	_, err := tx.Exec(ctx, `
		UPDATE scheduler_notification_deliveries
		SET status = $2, attempts = attempts + 1, last_status = $3, last_error = $4,
		    next_attempt_at = now() + $5::interval,
		    sent_at = CASE WHEN $2 = 'sent' THEN now() END
		WHERE id = $1 AND status = 'pending'`, o.ID, o.Status, o.LastStatus, o.LastError, o.RetryIn)
	if err != nil {
		return fmt.Errorf("record the attempt of notification %d: %w", o.ID, err)
	}
	return nil
}
