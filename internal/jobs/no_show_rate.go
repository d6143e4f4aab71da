package jobs

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/schedulerhq/scheduler/internal/jobcontract"
)

// NoShowRate warns each organization's admin when its no-show rate is high: every hour, each
// organization whose local time (its own zone, the run's clock) is in the 08:00 hour gets,
// if the no-show rate of its last 7 local days is at or above its no_show_threshold (default
// 20 %) over at least 10 appointments, one notice by email to admin_email. The rate is
// NO_SHOW appointments ÷ appointments not CANCELLED that started from local midnight 7 days
// ago to local midnight today: the local days are computed with the zone's rules, so a
// 23-hour or 25-hour day across a DST change counts as the day it is.
//
// Exactly once per (organization, local date): the organization is try-locked
// ('no-show-rate:<organization id>'), organizations already notified for the date are
// skipped, and the unique index message_deliveries_no_show_rate_key on the payload's
// organization_id and local_date refuses a second claim whatever happens.
//
// Backlog: a notice is only worth its 08:00 slot: if no run came during an organization's
// 08:00 hour it is not sent later that day. An organization whose 08:00 hour ended during the
// last hour (its local time is in the 09:00 hour) with a rate over its threshold and no
// notice is counted as too_late. An organization whose zone the scheduler cannot load is
// skipped and counted as bad_timezone.
type NoShowRate struct {
	s    AppointmentSettings
	pipe *Pipeline
}

// NewNoShowRate returns the no-show-rate job.
func NewNoShowRate(s AppointmentSettings, pipe *Pipeline) jobcontract.Job {
	return &NoShowRate{s: s.withDefaults(), pipe: pipe}
}

func (*NoShowRate) Name() string { return "no-show-rate" }

func (*NoShowRate) Defaults() jobcontract.Defaults {
	return jobcontract.Defaults{Schedule: "0 * * * *", Timeout: 10 * time.Minute}
}

const (
	noShowRateKind = "no-show-rate"
	// noShowRateHour is the local hour during which the notice goes out.
	noShowRateHour = 8
	// noShowRateDays is how many local days, before today, the rate covers.
	noShowRateDays = 7
	// noShowRateMinAppointments is the fewest appointments over which a rate means anything.
	noShowRateMinAppointments = 10
)

// noShowRateOrganizationsSQL reads the next organizations in id order.
const noShowRateOrganizationsSQL = `
SELECT id, timezone
FROM organizations
WHERE id > @after_id
ORDER BY id
LIMIT @limit`

// noShowRateClaimSQL takes the locked organizations of one batch whose local time is in the
// 08:00 hour (due) or in the 09:00 hour (their window just closed), each with its local date
// and the bounds of its last 7 local days; leaves out those already notified for the date;
// computes the others' rates along appointments_organization_start_idx; and claims a notice
// for the due ones at or above their threshold. It reports the due organizations not yet
// notified, those over their threshold, the too-late ones (over it, not due, not notified),
// the due ones under the minimum count, and the claimed notices.
const noShowRateClaimSQL = `
WITH batch AS (
    SELECT *
    FROM unnest(@organization_ids::bigint[], @local_dates::date[], @from_ats::timestamptz[],
                @to_ats::timestamptz[], @due::boolean[])
         AS t (organization_id, local_date, from_at, to_at, due)
),
unsent AS MATERIALIZED (
    SELECT b.* FROM batch b
    WHERE NOT EXISTS (
        -- The template is spelled out, not a parameter, so that the partial unique index
        -- message_deliveries_no_show_rate_key serves the look-up.
        SELECT 1 FROM message_deliveries d
        WHERE d.template = 'no-show-rate'
          AND (d.payload ->> 'organization_id')::bigint = b.organization_id
          AND d.payload ->> 'local_date' = b.local_date::text)
),
rate AS MATERIALIZED (
    SELECT u.organization_id, u.local_date, u.from_at, u.to_at, u.due,
           o.name, o.timezone, o.admin_email, o.no_show_threshold,
           (SELECT count(*) FROM appointments a
            WHERE a.organization_id = u.organization_id
              AND a.start_at >= u.from_at AND a.start_at < u.to_at
              AND a.status <> 'CANCELLED') AS appointments,
           (SELECT count(*) FROM appointments a
            WHERE a.organization_id = u.organization_id
              AND a.start_at >= u.from_at AND a.start_at < u.to_at
              AND a.status = 'NO_SHOW') AS no_shows
    FROM unsent u
    JOIN organizations o ON o.id = u.organization_id
),
over AS MATERIALIZED (
    SELECT * FROM rate
    WHERE appointments >= @min_appointments
      AND no_shows >= no_show_threshold * appointments
),
message AS (
    SELECT 'EMAIL' AS channel, admin_email AS "to",
           jsonb_build_object('organization_id', organization_id, 'kind', @kind::text,
                              'local_date', local_date, 'organization', name, 'timezone', timezone,
                              'from', from_at, 'to', to_at, 'appointments', appointments,
                              'no_shows', no_shows, 'rate', round(no_shows::numeric / appointments, 3),
                              'threshold', no_show_threshold) AS payload
    FROM over
    WHERE due
),
claimed AS (
    INSERT INTO message_deliveries (provider, channel, "to", template, payload_hash, payload, status, attempts)
    SELECT @provider, m.channel, m."to", @kind,
           encode(sha256(convert_to(m.payload::text, 'UTF8')), 'hex'), m.payload, 'PENDING', 1
    FROM message m
    -- Any unique key: (provider, channel, "to", payload_hash) or (organization, local date).
    ON CONFLICT DO NOTHING
    RETURNING id AS delivery_id, attempts AS attempt, provider, channel, "to", template, payload,
        (SELECT deployment_id::text FROM scheduler_identity) AS deployment_id
)
SELECT (SELECT count(*) FROM unsent WHERE due),
       (SELECT count(*) FROM over WHERE due),
       (SELECT count(*) FROM over WHERE NOT due),
       (SELECT count(*) FROM rate WHERE due AND appointments < @min_appointments),
       (SELECT coalesce(jsonb_agg(claimed ORDER BY delivery_id), '[]') FROM claimed)`

// rateOrg is an organization as the walk reads it, with its window at the run's clock.
type rateOrg struct {
	ID       int64
	Timezone string
	zoneErr  error     // its zone cannot be loaded
	hour     int       // its local hour at the run's clock
	date     time.Time // its local date, as PostgreSQL dates are passed: midnight UTC
	from, to time.Time // local midnight 7 days before date, and on date
}

// Run notifies every due organization over its threshold; a dry run counts the notices it
// would send and claims and sends nothing.
func (j *NoShowRate) Run(ctx context.Context, env *jobcontract.Env) (st jobcontract.Stats, err error) {
	out := j.pipe.Open(ctx, env, Hooks{})
	defer func() {
		sent, closeErr := out.Close()
		st.Add(sent)
		err = errors.Join(err, closeErr)
		env.Log.Info("no-show rates checked", "processed", st.Processed, "sent", st.Detail["sent"],
			"over_threshold", st.Detail["over_threshold"], "too_late", st.Detail["too_late"],
			"bad_timezone", st.Detail[detailBadTimezone], "skipped_locked", st.SkippedLocked,
			"dry_run", env.Params.DryRun)
	}()

	orphans, err := j.pipe.Reclaim(ctx, env, out, j.Name(), []string{noShowRateKind}, j.s.ClaimTimeout)
	st.Add(orphans)
	if err != nil {
		return st, fmt.Errorf("settle orphaned claims: %w", err)
	}

	zones := zoneCache{}
	walked, err := (&jobcontract.Walk[rateOrg]{
		Job:       j.Name(),
		BatchSize: j.s.BatchSize,
		Read:      noShowRateOrganizationsSQL,
		Start:     pgx.NamedArgs{"after_id": int64(0)},
		Keyset:    func(o rateOrg) pgx.NamedArgs { return pgx.NamedArgs{"after_id": o.ID} },
		Scan: func(row pgx.CollectableRow) (rateOrg, error) {
			var o rateOrg
			if err := row.Scan(&o.ID, &o.Timezone); err != nil {
				return o, err
			}
			loc, err := zones.load(o.Timezone)
			if err != nil {
				o.zoneErr = err
				return o, nil
			}
			o.hour = env.Now.In(loc).Hour()
			o.date = localDate(env.Now, loc)
			o.from = dropInstant(o.date.AddDate(0, 0, -noShowRateDays), 0, loc)
			o.to = dropInstant(o.date, 0, loc)
			return o, nil
		},
		Filter: func(o rateOrg, st *jobcontract.Stats) bool {
			if o.zoneErr != nil {
				st.Count(detailBadTimezone, 1)
				env.Log.Warn("organization skipped: its time zone cannot be loaded; fix organizations.timezone",
					"organization_id", o.ID, "timezone", o.Timezone, "error", o.zoneErr)
				return false
			}
			return o.hour == noShowRateHour || o.hour == noShowRateHour+1
		},
		Lock:  func(o rateOrg) int64 { return o.ID },
		Apply: func(ctx context.Context, b *jobcontract.Batch[rateOrg]) error { return j.claim(ctx, b, out) },
	}).Run(ctx, env)
	st.Add(walked)
	if err != nil {
		return st, fmt.Errorf("claim no-show-rate notices: %w", err)
	}
	return st, nil
}

// claim computes the rates of the batch's locked organizations and claims the notices due,
// which go to out once the batch has committed.
func (j *NoShowRate) claim(ctx context.Context, b *jobcontract.Batch[rateOrg], out *Outbox) error {
	var unsent, over, tooLate, tooFew int64
	var msgs []Message
	err := b.Tx.QueryRow(ctx, noShowRateClaimSQL, pgx.NamedArgs{
		"organization_ids": jobcontract.Column(b.Rows, func(o rateOrg) int64 { return o.ID }),
		"local_dates":      jobcontract.Column(b.Rows, func(o rateOrg) time.Time { return o.date }),
		"from_ats":         jobcontract.Column(b.Rows, func(o rateOrg) time.Time { return o.from }),
		"to_ats":           jobcontract.Column(b.Rows, func(o rateOrg) time.Time { return o.to }),
		"due":              jobcontract.Column(b.Rows, func(o rateOrg) bool { return o.hour == noShowRateHour }),
		"kind":             noShowRateKind,
		"provider":         j.pipe.Provider(),
		"min_appointments": noShowRateMinAppointments,
	}).Scan(&unsent, &over, &tooLate, &tooFew, &msgs)
	if err != nil {
		return err
	}
	due := int64(0)
	for _, o := range b.Rows {
		if o.hour == noShowRateHour {
			due++
		}
	}
	b.Stats.Count("due", due)
	b.Stats.Count("already_notified", due-unsent)
	b.Stats.Count("over_threshold", over)
	b.Stats.Count("too_few_appointments", tooFew)
	b.Stats.Count("too_late", tooLate)
	b.Stats.Count("claimed", int64(len(msgs)))
	// Over the threshold but a unique key already held the notice: another run claimed it
	// between this statement's snapshot and its insert.
	if dup := over - int64(len(msgs)); dup > 0 {
		b.Stats.Count("duplicate", dup)
	}
	sendOnCommit(b, out, msgs)
	return nil
}
