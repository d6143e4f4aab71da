package seed

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// appointmentsSeedLockSQL serialises concurrent seeds, so two of them never insert the same
// appointments twice (appointments have no unique natural key of their own).
const appointmentsSeedLockSQL = `SELECT pg_advisory_xact_lock(hashtextextended('seed:appointments', 0))`

// organizationsSQL inserts the seed organizations that do not exist yet: one per zone, the
// zones chosen for their DST rules (gaps and overlaps in Europe, North America and Lord
// Howe's 30-minute change; none in India and Japan).
const organizationsSQL = `
INSERT INTO organizations (name, timezone, admin_email, no_show_threshold)
SELECT 'Seed clinic ' || z.city, z.zone, 'admin@' || lower(z.city) || '.seed.example', z.threshold
FROM (VALUES ('Paris', 'Europe/Paris', 0.200),
             ('New York', 'America/New_York', 0.200),
             ('Lord Howe', 'Australia/Lord_Howe', 0.250),
             ('Kolkata', 'Asia/Kolkata', 0.150),
             ('Tokyo', 'Asia/Tokyo', 0.300)) AS z (city, zone, threshold)
ON CONFLICT (name) DO NOTHING`

// appointmentsSQL inserts appointments 1..@n that do not exist yet, named by their
// contact's address appointment-<i>@seed.example (the natural key), spread over the seed
// organizations in blocks of ten, so that each organization gets every kind. Times are
// relative to the database's clock, by number i (mod 10), so that each job has work right
// after seeding:
//   - 0: booked 2 hours ago for in 3 days: appointment-confirmations;
//   - 1: booked a week ago, starts in 2 to 23 hours: appointment-reminders-day;
//   - 2: starts in 5 to 55 minutes: appointment-reminders-hour;
//   - 3: started 1 to 14 minutes ago: appointment-start-notifications;
//   - 4: started 20 minutes to 3 hours ago, not checked in: no-show-detection;
//   - 5: a no-show 1 to 6 days ago: no-show-recovery;
//   - 6, 9: completed 1 to 6 days ago, checked in (with 5, a no-show rate of one in three
//     over the last 7 days: every seed organization gets a no-show-rate notice at 08:00
//     local once it has 10 such appointments, from 200 appointments on);
//   - 7: cancelled, starts in 2 to 23 hours (never reminded);
//   - 8: checked in, started 30 minutes ago (never a no-show).
const appointmentsSQL = `
WITH org AS (
    SELECT id, row_number() OVER (ORDER BY id) - 1 AS k
    FROM organizations WHERE name LIKE 'Seed clinic %'
),
wanted AS (
    SELECT i, i % 10 AS kind, 'appointment-' || i || '@seed.example' AS email
    FROM generate_series(1, @n::int) AS i
),
timed AS (
    SELECT w.*, o.id AS organization_id,
           date_trunc('minute', now()) + CASE w.kind
               WHEN 0 THEN interval '3 days' + (w.i % 60) * interval '1 minute'
               WHEN 1 THEN interval '2 hours' + (w.i % 21) * interval '1 hour'
               WHEN 2 THEN interval '5 minutes' + (w.i % 11) * interval '5 minutes'
               WHEN 3 THEN -interval '1 minute' - (w.i % 14) * interval '1 minute'
               WHEN 4 THEN -interval '20 minutes' - (w.i % 16) * interval '10 minutes'
               WHEN 5 THEN -interval '1 day' - (w.i % 5) * interval '1 day'
               WHEN 7 THEN interval '2 hours' + (w.i % 21) * interval '1 hour'
               WHEN 8 THEN -interval '30 minutes'
               ELSE -interval '1 day' - (w.i % 5) * interval '1 day' - interval '2 hours'
           END AS start_at
    FROM wanted w
    JOIN org o ON o.k = (w.i / 10) % (SELECT count(*) FROM org)
    WHERE NOT EXISTS (SELECT 1 FROM appointments a WHERE a.contact_email = w.email)
)
INSERT INTO appointments (organization_id, contact_email, contact_phone, host_email, start_at, end_at, status,
                          booked_at, checked_in_at, no_show_at)
SELECT organization_id,
       email,
       '+1555' || lpad(i::text, 7, '0'),
       'host-' || i % 7 || '@seed.example',
       start_at, start_at + interval '45 minutes',
       CASE kind WHEN 5 THEN 'NO_SHOW' WHEN 6 THEN 'COMPLETED' WHEN 9 THEN 'COMPLETED' WHEN 7 THEN 'CANCELLED'
                 ELSE 'BOOKED' END,
       CASE kind WHEN 0 THEN now() - interval '2 hours' ELSE least(now(), start_at) - interval '7 days' END,
       CASE WHEN kind IN (6, 8, 9) THEN start_at END,
       CASE WHEN kind = 5 THEN start_at + interval '15 minutes' END
FROM timed
ORDER BY i`

// Appointments seeds organizations in several time zones and appointments 1..n around now,
// some due for each appointment job, and returns how many appointments it inserted: 0 when
// they all exist already.
func Appointments(ctx context.Context, pool *pgxpool.Pool, n int) (int, error) {
	var inserted int64
	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, appointmentsSeedLockSQL); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, organizationsSQL); err != nil {
			return fmt.Errorf("insert organizations: %w", err)
		}
		tag, err := tx.Exec(ctx, appointmentsSQL, pgx.NamedArgs{"n": n})
		if err != nil {
			return fmt.Errorf("insert appointments: %w", err)
		}
		inserted = tag.RowsAffected()
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("seed appointments: %w", err)
	}
	return int(inserted), nil
}
