package main

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// appointmentsDataSQL inserts @orgs organizations and @n appointments relative to @now,
// one tenth due for each of the six per-appointment jobs (by i % 10) and the rest due for
// none: 0 confirmations (booked in the last day, starting in 2 days), 1 day reminders
// (starting in 1 to 24 hours), 2 hour reminders, 3 start notifications, 4 no-show
// detection (started 20 minutes to 30 days ago), 5 no-show recovery (no-shows of the last
// 7 days), 6..9 nothing (completed, cancelled, next month). One statement, set-based.
const appointmentsDataSQL = `
WITH org AS (
    INSERT INTO organizations (name, timezone, admin_email)
    SELECT 'bench-org-' || k, (ARRAY['Europe/Paris', 'America/New_York', 'Australia/Lord_Howe', 'Asia/Kolkata'])[1 + k % 4],
           'admin-' || k || '@bench.example'
    FROM generate_series(1, @orgs::int) AS k
    RETURNING id
),
org_ids AS (SELECT array_agg(id ORDER BY id) AS ids FROM org),
a AS (
    SELECT i, i % 10 AS kind, o.ids[1 + i % cardinality(o.ids)] AS organization_id,
           @now::timestamptz + CASE i % 10
               WHEN 0 THEN interval '2 days' + (i % 1440) * interval '1 minute'
               WHEN 1 THEN interval '61 minutes' + (i % 1379) * interval '1 minute'
               WHEN 2 THEN interval '1 second' + (i % 3599) * interval '1 second'
               WHEN 3 THEN -(i % 900) * interval '1 second'
               WHEN 4 THEN -interval '20 minutes' - (i % 43000) * interval '1 minute'
               WHEN 5 THEN -interval '1 hour' - (i % 9000) * interval '1 minute'
               WHEN 6 THEN -interval '1 hour' - (i % 9000) * interval '1 minute'
               WHEN 7 THEN interval '5 hours' + (i % 1000) * interval '1 minute'
               ELSE interval '30 days' + (i % 1000) * interval '1 minute'
           END AS start_at
    FROM generate_series(1, @n::int) AS i, org_ids o
)
INSERT INTO appointments (organization_id, contact_email, contact_phone, host_email, start_at, end_at, status,
                          booked_at, checked_in_at, no_show_at)
SELECT organization_id, CASE WHEN i % 7 <> 0 THEN 'contact-' || i || '@bench.example' END,
       '+1555' || lpad(i::text, 7, '0'), 'host-' || i % 100 || '@bench.example',
       start_at, start_at + interval '30 minutes',
       CASE kind WHEN 5 THEN 'NO_SHOW' WHEN 6 THEN 'COMPLETED' WHEN 7 THEN 'CANCELLED' ELSE 'BOOKED' END,
       CASE kind WHEN 0 THEN @now::timestamptz - (i % 1380) * interval '1 minute' - interval '1 minute'
                 ELSE least(@now::timestamptz, start_at) - interval '3 days' END,
       CASE kind WHEN 6 THEN start_at END,
       CASE kind WHEN 5 THEN start_at + interval '15 minutes' END
FROM a
ORDER BY i`

// The raw SQL the message jobs are compared with does the same writes as the message
// protocol, set-based: every due message inserted PENDING by one INSERT ... SELECT with the
// job's payload, then all of them recorded SENT by one UPDATE (rawRecordSQL), in one
// transaction, without batches, locks, guards, sends or the fence. (A single INSERT of
// SENT rows is reported beside it: the protocol's second write is the difference.)
const rawAppointmentMessageSQL = `
INSERT INTO message_deliveries (provider, channel, "to", template, payload_hash, payload, status, attempts)
SELECT 'log', m.channel, m."to", @kind, encode(sha256(convert_to(m.payload::text, 'UTF8')), 'hex'), m.payload,
       'PENDING', 1
FROM (
    SELECT %s,
           jsonb_build_object('appointment_id', a.id, 'kind', @kind::text, 'organization', o.name,
                              'timezone', o.timezone, 'start_at', a.start_at, 'end_at', a.end_at,
                              'contact_email', a.contact_email, 'contact_phone', a.contact_phone) AS payload
    FROM appointments a
    JOIN organizations o ON o.id = a.organization_id
    WHERE %s
) m`

// rawRecordSQL records every PENDING message SENT, as the pipeline's record step does.
const rawRecordSQL = `
UPDATE message_deliveries SET status = 'SENT', provider_message_id = 'message-delivery-' || (SELECT deployment_id FROM scheduler_identity) || '-' || id, sent_at = now()
WHERE status = 'PENDING'`

const (
	rawToContact = `CASE WHEN a.contact_email IS NOT NULL THEN 'EMAIL' ELSE 'SMS' END AS channel,
           coalesce(a.contact_email, a.contact_phone) AS "to"`
	rawToHost = `'EMAIL' AS channel, a.host_email AS "to"`

	rawNoShowDetectionSQL = `
UPDATE appointments SET status = 'NO_SHOW', no_show_at = @now
WHERE status = 'BOOKED' AND checked_in_at IS NULL AND start_at < @now::timestamptz - interval '15 minutes'`
)

// appointmentBenchJobs are the per-appointment jobs, each with its raw statement.
var appointmentBenchJobs = []struct {
	job, kind, raw string
}{
	{"appointment-confirmations", "appointment-confirmation", fmt.Sprintf(rawAppointmentMessageSQL, rawToContact, `a.status = 'BOOKED'
      AND a.booked_at > @now::timestamptz - interval '24 hours' AND a.booked_at <= @now::timestamptz
      AND a.start_at > @now::timestamptz`)},
	{"appointment-reminders-day", "appointment-reminder-day", fmt.Sprintf(rawAppointmentMessageSQL, rawToContact, `a.status = 'BOOKED'
      AND a.start_at > @now::timestamptz + interval '1 hour' AND a.start_at <= @now::timestamptz + interval '24 hours'`)},
	{"appointment-reminders-hour", "appointment-reminder-hour", fmt.Sprintf(rawAppointmentMessageSQL, rawToContact, `a.status = 'BOOKED'
      AND a.start_at > @now::timestamptz AND a.start_at <= @now::timestamptz + interval '1 hour'`)},
	{"appointment-start-notifications", "appointment-start-notification", fmt.Sprintf(rawAppointmentMessageSQL, rawToHost, `a.status = 'BOOKED'
      AND a.start_at >= @now::timestamptz - interval '15 minutes' AND a.start_at <= @now::timestamptz`)},
	{"no-show-detection", "", rawNoShowDetectionSQL},
	{"no-show-recovery", "no-show-recovery", fmt.Sprintf(rawAppointmentMessageSQL, rawToContact, `a.status = 'NO_SHOW'
      AND a.start_at >= @now::timestamptz - interval '7 days' AND a.start_at <= @now::timestamptz`)},
}

// rateDataSQL inserts @orgs organizations, each in a zone whose local time at @now is in the
// 08:00 hour (the Etc/GMT zones give every whole offset), and @per appointments each over
// its last 7 local days, one in four a no-show: every organization is due a notice.
const rateDataSQL = `
WITH zone AS (
    SELECT array_agg(name ORDER BY name) AS names
    FROM pg_timezone_names
    WHERE name LIKE 'Etc/GMT%' AND extract(hour FROM @now::timestamptz AT TIME ZONE name) = 8
),
org AS (
    INSERT INTO organizations (name, timezone, admin_email)
    SELECT 'rate-org-' || k, z.names[1 + k % cardinality(z.names)], 'admin-' || k || '@bench.example'
    FROM generate_series(1, @orgs::int) AS k, zone z
    RETURNING id
)
INSERT INTO appointments (organization_id, contact_email, host_email, start_at, end_at, status, booked_at, no_show_at)
SELECT org.id, 'c@bench.example', 'h@bench.example', t, t + interval '30 minutes',
       CASE WHEN j % 4 = 0 THEN 'NO_SHOW' ELSE 'COMPLETED' END, t - interval '3 days',
       CASE WHEN j % 4 = 0 THEN t + interval '15 minutes' END
FROM org, generate_series(1, @per::int) AS j,
     LATERAL (SELECT @now::timestamptz - interval '1 day' - j * interval '11 hours' AS t) s
ORDER BY org.id, j`

// rawNoShowRateSQL is no-show-rate's claim as one statement: each organization's window
// from AT TIME ZONE in SQL (right here, where no window crosses a DST change), its rate, and
// a PENDING notice for those over the threshold; rawRecordSQL then records them SENT.
const rawNoShowRateSQL = `
WITH win AS (
    SELECT o.*, d AS local_date,
           (d - 7)::timestamp AT TIME ZONE o.timezone AS from_at, d::timestamp AT TIME ZONE o.timezone AS to_at
    FROM organizations o, LATERAL (SELECT (@now::timestamptz AT TIME ZONE o.timezone)::date AS d) l
    WHERE extract(hour FROM @now::timestamptz AT TIME ZONE o.timezone) = 8
),
rate AS (
    SELECT w.*,
           (SELECT count(*) FROM appointments a WHERE a.organization_id = w.id AND a.start_at >= w.from_at
              AND a.start_at < w.to_at AND a.status <> 'CANCELLED') AS appointments,
           (SELECT count(*) FROM appointments a WHERE a.organization_id = w.id AND a.start_at >= w.from_at
              AND a.start_at < w.to_at AND a.status = 'NO_SHOW') AS no_shows
    FROM win w
),
message AS (
    SELECT admin_email AS "to",
           jsonb_build_object('organization_id', id, 'kind', 'no-show-rate', 'local_date', local_date,
                              'organization', name, 'timezone', timezone, 'from', from_at, 'to', to_at,
                              'appointments', appointments, 'no_shows', no_shows,
                              'rate', round(no_shows::numeric / appointments, 3), 'threshold', no_show_threshold) AS payload
    FROM rate
    WHERE appointments >= 10 AND no_shows >= no_show_threshold * appointments
)
INSERT INTO message_deliveries (provider, channel, "to", template, payload_hash, payload, status, attempts)
SELECT 'log', 'EMAIL', "to", 'no-show-rate', encode(sha256(convert_to(payload::text, 'UTF8')), 'hex'), payload,
       'PENDING', 1
FROM message`

func benchAppointments(ctx context.Context, b *bench) error {
	n := b.sz.appointments
	due := int64(n / 10)
	// Whole seconds: the child gets the clock as text.
	now := time.Now().UTC().Truncate(time.Second)

	tmpl, err := b.migratedDB(ctx, "appointments_tmpl")
	if err != nil {
		return err
	}
	defer b.dropDB(ctx, tmpl)
	t := time.Now()
	if err := execOn(ctx, b.url(tmpl), appointmentsDataSQL, pgx.NamedArgs{"orgs": 1000, "n": n, "now": now}); err != nil {
		return fmt.Errorf("insert %d appointments: %w", n, err)
	}
	if err := b.finishTemplate(ctx, tmpl); err != nil {
		return err
	}
	b.log.Info("appointments data set built", "appointments", n, "took", time.Since(t).Round(time.Millisecond))
	data := fmt.Sprintf("%s appointments, %s due", count(n), count(int(due)))
	for _, j := range appointmentBenchJobs {
		err := benchAppointmentJob(ctx, b, tmpl, j.job, j.raw, pgx.NamedArgs{"now": now, "kind": j.kind}, now, due, data)
		if err != nil {
			return fmt.Errorf("%s: %w", j.job, err)
		}
	}

	rate, err := b.migratedDB(ctx, "rate_tmpl")
	if err != nil {
		return err
	}
	defer b.dropDB(ctx, rate)
	orgs, per := n/10, 10
	t = time.Now()
	if err := execOn(ctx, b.url(rate), rateDataSQL, pgx.NamedArgs{"orgs": orgs, "per": per, "now": now}); err != nil {
		return fmt.Errorf("insert %d organizations: %w", orgs, err)
	}
	if err := b.finishTemplate(ctx, rate); err != nil {
		return err
	}
	b.log.Info("no-show-rate data set built", "organizations", orgs, "took", time.Since(t).Round(time.Millisecond))
	return benchAppointmentJob(ctx, b, rate, "no-show-rate", rawNoShowRateSQL, pgx.NamedArgs{"now": now}, now, int64(orgs),
		fmt.Sprintf("%s organizations at 08:00 local, %s appointments", count(orgs), count(orgs*per)))
}

func execOn(ctx context.Context, url, sql string, args pgx.NamedArgs) error {
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		return err
	}
	defer pool.Close()
	_, err = pool.Exec(ctx, sql, args)
	return err
}

// benchAppointmentJob times job (a child process, log sender) and its raw statement on
// fresh copies of tmpl, both at the clock now; each must change want rows.
func benchAppointmentJob(ctx context.Context, b *bench, tmpl, job, rawSQL string, rawArgs pgx.NamedArgs,
	now time.Time, want int64, data string) error {
	var jobTimes, rawTimes, writeTimes []time.Duration
	sends := job != "no-show-detection"
	var maxRSS int64
	var stats string
	for range b.sz.reps {
		err := onCopy(ctx, b, tmpl, func(_ *pgxpool.Pool, url string) error {
			res, err := runJobChild(ctx, job, url, envNow+"="+now.Format(time.RFC3339))
			if err != nil {
				return err
			}
			if res.stats.Changed != want {
				return fmt.Errorf("the job changed %d, want %d: %+v", res.stats.Changed, want, res.stats)
			}
			jobTimes = append(jobTimes, res.took)
			maxRSS = max(maxRSS, res.maxRSSKB)
			stats = fmt.Sprintf("processed %d, skipped_locked %d, record batches %d", res.stats.Processed,
				res.stats.SkippedLocked, res.stats.Detail["record_batches"])
			return nil
		})
		if err != nil {
			return err
		}
		err = onCopy(ctx, b, tmpl, func(db *pgxpool.Pool, _ string) error {
			start := time.Now()
			return pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
				tag, err := tx.Exec(ctx, rawSQL, rawArgs)
				if err != nil {
					return fmt.Errorf("raw statement: %w", err)
				}
				if tag.RowsAffected() != want {
					return fmt.Errorf("raw statement changed %d rows, want %d", tag.RowsAffected(), want)
				}
				if sends {
					writeTimes = append(writeTimes, time.Since(start))
					if _, err := tx.Exec(ctx, rawRecordSQL); err != nil {
						return fmt.Errorf("raw record: %w", err)
					}
				}
				rawTimes = append(rawTimes, time.Since(start))
				return nil
			})
		})
		if err != nil {
			return err
		}
	}
	jm, rm := median(jobTimes), median(rawTimes)
	name, what := job+" job ÷ one raw SQL statement", "the raw UPDATE"
	if sends {
		name, what = job+" job ÷ raw SQL claim + record", fmt.Sprintf(
			"raw: one INSERT ... SELECT of every due message PENDING (alone: %s, i.e. job ÷ it = %.2f) then one UPDATE to SENT, in one transaction",
			dur(median(writeTimes)), ratio(jm, median(writeTimes)))
	}
	b.report.add(row{name: name, data: data,
		value: dur(jm), ref: dur(rm), ratio: fmt.Sprintf("%.2f", ratio(jm, rm)), target: "≤ 1.5",
		pass: verdict(ratio(jm, rm) <= 1.5),
		note: fmt.Sprintf("job body in a child process with a fenced Env and the log sender (batches of 1000: keyset read "+
			"one batch ahead, try-locks, guarded claim or change, pipeline send and record; the per-appointment jobs apply "+
			"two batches at once; %s); %s; runs: job %s, raw %s; peak RSS %.1f MB",
			stats, what, durs(jobTimes), durs(rawTimes), float64(maxRSS)/1024)})
	return nil
}
