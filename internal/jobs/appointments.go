package jobs

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/schedulerhq/scheduler/internal/config"
	"github.com/schedulerhq/scheduler/internal/jobcontract"
)

// The shared shape of the five appointment jobs that send one message per appointment and
// kind (appointment-confirmations, appointment-reminders-day, appointment-reminders-hour,
// appointment-start-notifications, no-show-recovery). A job is its window (a SQL condition
// on the appointment and the run's clock), its recipient, its too-late condition and its
// defaults; this file walks the due appointments (walk.go) and sends through the message
// pipeline (messages.go).
//
// Exactly once per (appointment, kind):
//   - the walk reads only appointments whose message of this kind is not claimed yet (the
//     unique index message_deliveries_appointment_kind_key, on the payload's appointment_id
//     and the template, which is the kind);
//   - each appointment is try-locked ('<job>:<appointment id>'), so copies of a job split the
//     work instead of both claiming it;
//   - the claim re-reads the locked appointments with the window as guard, in a snapshot
//     taken after the lock (READ COMMITTED), so an appointment cancelled (or moved) since the
//     batch was read is not claimed. It takes no row lock: a cancellation that commits after
//     the claim began is ordered after it, as one committing just after the claim's commit
//     would be under any lock (the send follows the claim). A row lock would only make the
//     claim wait for such a cancellation, at the price of dirtying every appointment page
//     it reads (a full-page image in the WAL for each, the first time after a checkpoint:
//     161 MB for 100 000 reminders in the benchmark) and of blocking the application's
//     writers for the batch;
//   - the claim inserts ON CONFLICT DO NOTHING on every unique key, that index and
//     (provider, channel, "to", payload_hash) alike. Only the rows a run inserted are sent.
//
// Windows that passed are not sent late. Each run counts, as too_late, the appointments
// whose window closed during the last period of the job's default schedule without their
// message (so summing too_late over the runs counts each about once). A claim orphaned by a
// crash is settled by the pipeline's Reclaim after the claim timeout, but only while its
// window is open: one whose window has closed meanwhile is marked FAILED as too late first.

// The walks over appointments apply appointmentParallel batches at once, each of up to
// BatchSize appointments (appointmentBatchSizeDefault): one batch is claimed while the
// other commits and sends, so a job holds up to 2 000 entity locks (docs/operations.md,
// "Lock table"). Each appointment is one row and its own entity, as Walk.Parallel requires.
const (
	appointmentBatchSizeDefault = 1000
	appointmentParallel         = 2
)

// AppointmentSettings configure the appointment jobs.
type AppointmentSettings struct {
	// NoShowGrace is how long after its start an appointment not checked in is a no-show
	// (config's SCHEDULER_NO_SHOW_GRACE).
	NoShowGrace time.Duration
	// ClaimTimeout is how long a claimed message may stay PENDING before its claim counts as
	// orphaned by a crash (as AbandonSettings.ClaimTimeout; the service uses the same value).
	ClaimTimeout time.Duration
	// BatchSize bounds the appointments (or organizations) read, locked and claimed per
	// transaction; two batches of appointments are applied at once.
	BatchSize int
}

func (s AppointmentSettings) withDefaults() AppointmentSettings {
	if s.NoShowGrace <= 0 {
		s.NoShowGrace = config.NoShowGraceDefault
	}
	if s.ClaimTimeout <= 0 {
		s.ClaimTimeout = abandonClaimTimeoutDefault
	}
	if s.BatchSize <= 0 {
		s.BatchSize = appointmentBatchSizeDefault
	}
	return s
}

// Recipients of appointment messages, as the channel and "to" columns of a claim over the
// appointment a: its contact by email when there is one, else by SMS; or its host by email.
const (
	toContact = `CASE WHEN a.contact_email IS NOT NULL THEN 'EMAIL' ELSE 'SMS' END AS channel,
           coalesce(a.contact_email, a.contact_phone) AS "to"`
	toHost = `'EMAIL' AS channel, a.host_email AS "to"`
)

// appointmentJob describes one message-sending appointment job.
type appointmentJob struct {
	name     string
	kind     string // the payload's kind and the delivery's template
	defaults jobcontract.Defaults
	// keyset is the column the walk follows: start_at or booked_at (both indexed for BOOKED
	// appointments, start_at for NO_SHOW ones).
	keyset string
	// window is the SQL condition, on the appointment a and @now, under which its message
	// is due. It names a.status, so that the partial index of that status serves the walk.
	window string
	// to is toContact or toHost.
	to string
	// tooLate is the SQL condition, on a and @now, of an appointment whose window closed
	// during the last period; too_late counts those without their message.
	tooLate string
}

// appointmentMessages is a message-sending appointment job: its statements, built once from
// its appointmentJob.
type appointmentMessages struct {
	appointmentJob
	s    AppointmentSettings
	pipe *Pipeline
	// read, claim, expire and countTooLate are the job's statements (see their builders).
	read, claim, expire, countTooLate string
}

func newAppointmentMessages(j appointmentJob, s AppointmentSettings, pipe *Pipeline) appointmentMessages {
	return appointmentMessages{
		appointmentJob: j, s: s.withDefaults(), pipe: pipe,
		read:         appointmentReadSQL(j),
		claim:        appointmentClaimSQL(j),
		expire:       appointmentExpireSQL(j),
		countTooLate: appointmentTooLateSQL(j),
	}
}

func (j *appointmentMessages) Name() string                   { return j.name }
func (j *appointmentMessages) Defaults() jobcontract.Defaults { return j.defaults }

// notClaimed is true for an appointment a whose message of kind @kind has no delivery yet:
// a probe of the unique index message_deliveries_appointment_kind_key.
const notClaimed = `NOT EXISTS (
          SELECT 1 FROM message_deliveries d
          WHERE d.template || ':' || (d.payload ->> 'appointment_id') = @kind::text || ':' || a.id)`

// appointmentReadSQL reads the next due appointments without a message of this kind, in
// keyset order along the partial index of the window's status.
func appointmentReadSQL(j appointmentJob) string {
	return `
SELECT a.id, a.` + j.keyset + `
FROM appointments a
WHERE ` + j.window + `
  AND (a.` + j.keyset + `, a.id) > (@after_at, @after_id)
  AND ` + notClaimed + `
ORDER BY a.` + j.keyset + `, a.id
LIMIT @limit`
}

// appointmentClaimSQL claims the messages of the locked appointments @ids still in their
// window, in one statement: re-read them with the window as guard, build each
// message (the payload names the appointment and the kind, plus what the template needs:
// the organization, its zone, the times and, for the host, the contact), and insert them as
// PENDING deliveries.
func appointmentClaimSQL(j appointmentJob) string {
	return `
WITH message AS (
    SELECT ` + j.to + `,
           jsonb_build_object('appointment_id', a.id, 'kind', @kind::text, 'organization', o.name,
                              'timezone', o.timezone, 'start_at', a.start_at, 'end_at', a.end_at,
                              'contact_email', a.contact_email, 'contact_phone', a.contact_phone) AS payload
    FROM appointments a
    JOIN organizations o ON o.id = a.organization_id
    WHERE a.id = ANY(@ids::bigint[])
      -- Guard, in this statement's snapshot (taken after the lock): still in the window.
      AND ` + j.window + `
)
INSERT INTO message_deliveries (provider, channel, "to", template, payload_hash, payload, status, attempts)
SELECT @provider, m.channel, m."to", @kind, encode(sha256(convert_to(m.payload::text, 'UTF8')), 'hex'), m.payload, 'PENDING', 1
FROM message m
-- Already claimed: the (appointment, kind) key, or (provider, channel, "to", payload_hash),
-- which holds the same message (the payload names the appointment and the kind). Both are
-- arbiters: PostgreSQL checks a unique index that is not one only as it inserts, and fails
-- the statement when a transaction inserting the same message commits between this
-- statement's check of the arbiter and that insert.
ON CONFLICT DO NOTHING
RETURNING ` + MessageColumns
}

// appointmentExpireSQL marks FAILED the orphaned claims (PENDING for longer than
// @claim_timeout) of this kind whose appointment is no longer in its window, before Reclaim
// would resend them late, and returns how many.
func appointmentExpireSQL(j appointmentJob) string {
	return `
WITH expired AS (
    UPDATE message_deliveries d
    SET status = 'FAILED',
        error = 'too late: the claim was orphaned by a crash and its window closed before it could be resent'
    WHERE d.template = @kind AND d.status = 'PENDING'
      AND d.claimed_at < now() - @claim_timeout::interval
      AND NOT EXISTS (
          SELECT 1 FROM appointments a
          WHERE a.id = (d.payload ->> 'appointment_id')::bigint AND ` + j.window + `)
    RETURNING 1
)
SELECT count(*) FROM expired`
}

// appointmentTooLateSQL counts the appointments whose window closed during the last period
// without their message.
func appointmentTooLateSQL(j appointmentJob) string {
	return `
SELECT count(*)
FROM appointments a
WHERE ` + j.tooLate + `
  AND ` + notClaimed
}

// appointmentRow is one due appointment, as the walk reads it.
type appointmentRow struct {
	ID int64
	At time.Time // the keyset column
}

// Run expires the orphaned claims whose window has closed, counts the too-late
// appointments, resends the other orphans through an idempotent sender, then claims and
// sends the due messages batch after batch. A dry run counts the messages it would send;
// it claims and sends nothing.
func (j *appointmentMessages) Run(ctx context.Context, env *jobcontract.Env) (st jobcontract.Stats, err error) {
	out := j.pipe.Open(ctx, env, Hooks{})
	defer func() {
		sent, closeErr := out.Close()
		st.Add(sent)
		err = errors.Join(err, closeErr)
		env.Log.Info("appointment messages sent", "kind", j.kind, "processed", st.Processed,
			"sent", st.Detail["sent"], "failed", st.Detail["failed"], "too_late", st.Detail["too_late"],
			"skipped_locked", st.SkippedLocked, "dry_run", env.Params.DryRun)
	}()

	args := pgx.NamedArgs{"now": env.Now, "kind": j.kind, "claim_timeout": j.s.ClaimTimeout}
	var expired, tooLate int64
	err = env.Tx(ctx, func(tx pgx.Tx) error {
		if err := tx.QueryRow(ctx, j.expire, args).Scan(&expired); err != nil {
			return fmt.Errorf("expire orphaned claims: %w", err)
		}
		if err := tx.QueryRow(ctx, j.countTooLate, args).Scan(&tooLate); err != nil {
			return fmt.Errorf("count too-late messages: %w", err)
		}
		if env.Params.DryRun {
			return jobcontract.ErrDryRun // counted, not expired
		}
		return nil
	})
	if err != nil && !errors.Is(err, jobcontract.ErrDryRun) {
		return st, err
	}
	st.Count("too_late", tooLate+expired)
	st.Count("orphan_too_late", expired)
	if tooLate+expired > 0 {
		env.Log.Warn("messages not sent: their window closed before a run could send them",
			"kind", j.kind, "too_late", tooLate, "orphans_too_late", expired)
	}

	orphans, err := j.pipe.Reclaim(ctx, env, out, j.name, []string{j.kind}, j.s.ClaimTimeout)
	st.Add(orphans)
	if err != nil {
		return st, fmt.Errorf("settle orphaned claims: %w", err)
	}

	claims, err := (&jobcontract.Walk[appointmentRow]{
		Job:       j.name,
		BatchSize: j.s.BatchSize,
		Read:      j.read,
		Args:      pgx.NamedArgs{"now": env.Now, "kind": j.kind},
		Start:     pgx.NamedArgs{"after_at": time.Time{}, "after_id": int64(0)},
		Keyset:    func(a appointmentRow) pgx.NamedArgs { return pgx.NamedArgs{"after_at": a.At, "after_id": a.ID} },
		Lock:      func(a appointmentRow) int64 { return a.ID },
		Parallel:  appointmentParallel,
		Apply: func(ctx context.Context, b *jobcontract.Batch[appointmentRow]) error {
			// Planned for this batch's ids each time (an unnamed statement): the generic plan
			// a prepared statement falls back to assumes one id, and joins the organizations
			// row by row.
			rows, err := b.Tx.Query(ctx, j.claim, pgx.QueryExecModeExec, pgx.NamedArgs{
				"ids": jobcontract.Column(b.Rows, func(a appointmentRow) int64 { return a.ID }),
				"now": env.Now, "kind": j.kind, "provider": j.pipe.Provider(),
			})
			if err != nil {
				return fmt.Errorf("claim: %w", err)
			}
			msgs, err := pgx.CollectRows(rows, ScanMessage)
			if err != nil {
				return fmt.Errorf("claim: %w", err)
			}
			b.Stats.Count("claimed", int64(len(msgs)))
			// Locked but not claimed: cancelled, moved or started since the batch was read
			// (the guard), or claimed by another run meanwhile (a unique key).
			b.CountStale(int64(len(msgs)))
			sendOnCommit(b, out, msgs)
			return nil
		},
	}).Run(ctx, env)
	st.Add(claims)
	if err != nil {
		return st, fmt.Errorf("claim %s messages: %w", j.kind, err)
	}
	return st, nil
}
