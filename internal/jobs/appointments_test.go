package jobs_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schedulerhq/scheduler/internal/jobcontract"
	"github.com/schedulerhq/scheduler/internal/jobs"
	"github.com/schedulerhq/scheduler/internal/jobs/jobstest"
	"github.com/schedulerhq/scheduler/internal/store"
	"github.com/schedulerhq/scheduler/internal/testdb"
)

// apptNow is the clock of the appointment jobs' runs, unless a test sets its own.
var apptNow = time.Date(2026, 3, 15, 12, 0, 0, 0, time.UTC)

// apptZones are the organizations' zones: a DST gap and overlap each in Europe, North
// America and Lord Howe (a 30-minute change), and a zone without DST.
var apptZones = []string{"Europe/Paris", "America/New_York", "Australia/Lord_Howe", "Asia/Kolkata"}

// openAppointments returns this test's database and a pool on it for the test's own
// queries, with one organization per zone of apptZones (ids in that order).
func openAppointments(t *testing.T) (*testdb.DB, *pgxpool.Pool, []int64) {
	t.Helper()
	db, _ := testdb.Open(t, store.Options{})
	pool := db.Pool
	var orgs []int64
	for _, zone := range apptZones {
		var id int64
		require.NoError(t, pool.QueryRow(context.Background(), `
INSERT INTO organizations (name, timezone, admin_email) VALUES ($1, $1, 'admin@' || lower(replace($1, '/', '-')) || '.example')
RETURNING id`, zone).Scan(&id))
		orgs = append(orgs, id)
	}
	return db, pool, orgs
}

// appts describes n appointments spread over the organizations: the i-th starts at
// start + i × step, was booked at booked + i × step (48 hours before its start if booked is
// zero) and has the given status. Every third contact has only a phone.
type appts struct {
	n         int
	status    string
	start     time.Time
	step      time.Duration
	booked    time.Time
	checkedIn bool
}

// add inserts the appointments and returns their ids in order.
func (a appts) add(t *testing.T, pool *pgxpool.Pool, orgs []int64) []int64 {
	t.Helper()
	if a.status == "" {
		a.status = "BOOKED"
	}
	booked := a.booked
	if booked.IsZero() {
		booked = a.start.Add(-48 * time.Hour)
	}
	rows, err := pool.Query(context.Background(), `
INSERT INTO appointments (organization_id, contact_email, contact_phone, host_email, start_at, end_at,
                          status, booked_at, checked_in_at, no_show_at)
SELECT ($1::bigint[])[1 + i % cardinality($1::bigint[])],
       CASE WHEN i % 3 <> 2 THEN 'contact-' || $8::text || '-' || i || '@example.com' END,
       '+3360000' || lpad(i::text, 4, '0'),
       'host-' || i % 5 || '@example.com',
       $2::timestamptz + i * $3::interval, $2::timestamptz + i * $3::interval + interval '30 minutes',
       $4, $5::timestamptz + i * $3::interval,
       CASE WHEN $6 THEN $2::timestamptz + i * $3::interval - interval '5 minutes' END,
       CASE WHEN $4 = 'NO_SHOW' THEN $2::timestamptz + i * $3::interval + interval '15 minutes' END
FROM generate_series(0, $7::int - 1) AS i
ORDER BY i
RETURNING id`, orgs, a.start, a.step, a.status, booked, a.checkedIn, a.n, fmt.Sprintf("%s-%d", a.status, a.start.Unix()))
	require.NoError(t, err)
	ids, err := pgxCollectIDs(rows)
	require.NoError(t, err)
	return ids
}

// appointmentSender records every message it is asked to send.
type appointmentSender struct {
	mu   sync.Mutex
	sent []jobs.Message
}

func (*appointmentSender) Provider() string { return "test" }
func (*appointmentSender) Idempotent() bool { return false }
func (s *appointmentSender) Send(_ context.Context, m jobs.Message) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sent = append(s.sent, m)
	return "test-" + m.IdempotencyKey(), nil
}

// perAppointment counts the messages sent per appointment id.
func (s *appointmentSender) perAppointment(t *testing.T) map[int64]int {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[int64]int{}
	for _, m := range s.sent {
		var p struct {
			AppointmentID int64 `json:"appointment_id"`
		}
		require.NoError(t, json.Unmarshal(m.Payload, &p))
		out[p.AppointmentID]++
	}
	return out
}

// messageJob is one of the five jobs that send one message per appointment, with data that
// is due, not due and too late for it at apptNow.
type messageJob struct {
	name    string
	kind    string
	newJob  func(jobs.AppointmentSettings, *jobs.Pipeline) jobcontract.Job
	toHost  bool
	seed    func(t *testing.T, pool *pgxpool.Pool, orgs []int64) (due []int64)
	tooLate int64
}

var messageJobs = []messageJob{
	{
		name: "appointment-confirmations", kind: "appointment-confirmation", newJob: jobs.NewAppointmentConfirmations,
		seed: func(t *testing.T, pool *pgxpool.Pool, orgs []int64) []int64 {
			start := apptNow.Add(48 * time.Hour)
			due := appts{n: 150, start: start, step: time.Minute, booked: apptNow.Add(-23 * time.Hour)}.add(t, pool, orgs)
			appts{n: 10, status: "CANCELLED", start: start, step: time.Minute, booked: apptNow.Add(-time.Hour)}.add(t, pool, orgs)
			// Booked 24.5 hours ago: the window closed half an hour ago (too late).
			appts{n: 3, start: start, step: time.Second, booked: apptNow.Add(-24*time.Hour - 30*time.Minute)}.add(t, pool, orgs)
			// Booked 2 hours ago for an appointment that started 30 minutes ago (too late).
			appts{n: 2, start: apptNow.Add(-30 * time.Minute), step: time.Second, booked: apptNow.Add(-2 * time.Hour)}.add(t, pool, orgs)
			// Booked 3 days ago: long gone, neither due nor counted.
			appts{n: 4, start: start, step: time.Second, booked: apptNow.Add(-72 * time.Hour)}.add(t, pool, orgs)
			// Booked after the run's clock.
			appts{n: 2, start: start, step: time.Second, booked: apptNow.Add(time.Minute)}.add(t, pool, orgs)
			return due
		},
		tooLate: 5,
	},
	{
		name: "appointment-reminders-day", kind: "appointment-reminder-day", newJob: jobs.NewAppointmentRemindersDay,
		seed: func(t *testing.T, pool *pgxpool.Pool, orgs []int64) []int64 {
			// From just over 1 hour to exactly 24 hours away.
			due := appts{n: 150, start: apptNow.Add(24 * time.Hour), step: -9 * time.Minute}.add(t, pool, orgs)
			appts{n: 10, status: "CANCELLED", start: apptNow.Add(2 * time.Hour), step: time.Minute}.add(t, pool, orgs)
			appts{n: 3, start: apptNow.Add(24*time.Hour + time.Second), step: time.Hour}.add(t, pool, orgs)
			// Starting within the hour: too late, unless booked less than an hour before
			// the start (their window never opened).
			appts{n: 4, start: apptNow.Add(time.Hour), step: -10 * time.Minute}.add(t, pool, orgs)
			appts{n: 2, start: apptNow.Add(30 * time.Minute), step: time.Minute, booked: apptNow.Add(-20 * time.Minute)}.add(t, pool, orgs)
			// Started: not counted.
			appts{n: 2, start: apptNow.Add(-time.Minute), step: -time.Hour}.add(t, pool, orgs)
			return due
		},
		tooLate: 4,
	},
	{
		name: "appointment-reminders-hour", kind: "appointment-reminder-hour", newJob: jobs.NewAppointmentRemindersHour,
		seed: func(t *testing.T, pool *pgxpool.Pool, orgs []int64) []int64 {
			// From exactly 1 hour away down to 20 seconds away.
			due := appts{n: 150, start: apptNow.Add(time.Hour), step: -20 * time.Second}.add(t, pool, orgs)
			appts{n: 10, status: "CANCELLED", start: apptNow.Add(10 * time.Minute), step: time.Second}.add(t, pool, orgs)
			appts{n: 3, start: apptNow.Add(time.Hour + time.Second), step: time.Minute}.add(t, pool, orgs)
			// Started now or in the last 15 minutes, one of them checked in: too late.
			appts{n: 3, start: apptNow, step: -7 * time.Minute}.add(t, pool, orgs)
			appts{n: 1, start: apptNow.Add(-5 * time.Minute), checkedIn: true}.add(t, pool, orgs)
			// Started earlier: not counted.
			appts{n: 2, start: apptNow.Add(-15*time.Minute - time.Second), step: -time.Minute}.add(t, pool, orgs)
			return due
		},
		tooLate: 4,
	},
	{
		name: "appointment-start-notifications", kind: "appointment-start-notification", newJob: jobs.NewAppointmentStartNotifications,
		toHost: true,
		seed: func(t *testing.T, pool *pgxpool.Pool, orgs []int64) []int64 {
			// From now back to exactly 15 minutes ago; checked in or not.
			due := appts{n: 100, start: apptNow, step: -9 * time.Second}.add(t, pool, orgs)
			due = append(due, appts{n: 50, start: apptNow.Add(-time.Second), step: -17 * time.Second, checkedIn: true}.add(t, pool, orgs)...)
			appts{n: 10, status: "CANCELLED", start: apptNow.Add(-5 * time.Minute), step: time.Second}.add(t, pool, orgs)
			appts{n: 3, start: apptNow.Add(time.Second), step: time.Minute}.add(t, pool, orgs)
			// Started 15 to 30 minutes ago, BOOKED or already a no-show: too late.
			appts{n: 3, start: apptNow.Add(-16 * time.Minute), step: -4 * time.Minute}.add(t, pool, orgs)
			appts{n: 2, status: "NO_SHOW", start: apptNow.Add(-25 * time.Minute), step: time.Minute}.add(t, pool, orgs)
			appts{n: 2, start: apptNow.Add(-31 * time.Minute), step: -time.Hour}.add(t, pool, orgs)
			return due
		},
		tooLate: 5,
	},
	{
		name: "no-show-recovery", kind: "no-show-recovery", newJob: jobs.NewNoShowRecovery,
		seed: func(t *testing.T, pool *pgxpool.Pool, orgs []int64) []int64 {
			// From exactly 7 days ago to the run's clock.
			due := appts{n: 150, status: "NO_SHOW", start: apptNow.Add(-7 * 24 * time.Hour), step: 67 * time.Minute}.add(t, pool, orgs)
			appts{n: 10, status: "CANCELLED", start: apptNow.Add(-24 * time.Hour), step: time.Minute}.add(t, pool, orgs)
			appts{n: 10, status: "COMPLETED", start: apptNow.Add(-24 * time.Hour), step: time.Minute}.add(t, pool, orgs)
			// 7 days ran out during the last hour: too late; earlier: not counted.
			appts{n: 3, status: "NO_SHOW", start: apptNow.Add(-7*24*time.Hour - time.Second), step: -20 * time.Minute}.add(t, pool, orgs)
			appts{n: 2, status: "NO_SHOW", start: apptNow.Add(-10 * 24 * time.Hour), step: time.Hour}.add(t, pool, orgs)
			return due
		},
		tooLate: 3,
	},
}

func TestAppointmentMessagesThreeCopiesSendEachDueMessageOnce(t *testing.T) {
	t.Parallel()
	for _, tc := range messageJobs {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			db, pool, orgs := openAppointments(t)
			due := tc.seed(t, pool, orgs)
			sender := &appointmentSender{}
			j := tc.newJob(jobs.AppointmentSettings{BatchSize: 20}, jobs.NewPipeline(sender, jobs.SendSettings{}))
			require.Equal(t, tc.name, j.Name())
			env := jobstest.NewEnv(t, db, tc.name, apptNow)

			stats := runTogether(t, j, env, 3)
			var total jobcontract.Stats
			for _, st := range stats {
				total.Add(st)
				assert.Equal(t, tc.tooLate, st.Detail["too_late"], "each run counts the too-late appointments")
			}
			t.Logf("3 runs: %+v", stats)
			perAppt := sender.perAppointment(t)
			assert.Len(t, perAppt, len(due), "every due appointment got a message, and no other did")
			for _, id := range due {
				assert.Equal(t, 1, perAppt[id], "appointment %d", id)
			}
			assert.EqualValues(t, len(due), total.Changed)
			assert.Equal(t, map[string]int{"SENT": len(due)}, deliveries(t, pool))

			var wrong int
			require.NoError(t, pool.QueryRow(ctx, `
SELECT count(*)
FROM message_deliveries d
JOIN appointments a ON a.id = (d.payload ->> 'appointment_id')::bigint
JOIN organizations o ON o.id = a.organization_id
WHERE d.template <> $1 OR d.payload ->> 'kind' <> $1 OR d.payload ->> 'timezone' <> o.timezone
   OR d."to" <> CASE WHEN $2 THEN a.host_email ELSE coalesce(a.contact_email, a.contact_phone) END
   OR d.channel <> CASE WHEN $2 OR a.contact_email IS NOT NULL THEN 'EMAIL' ELSE 'SMS' END
   OR a.status = 'CANCELLED'
   OR d.payload_hash <> encode(sha256(convert_to(d.payload::text, 'UTF8')), 'hex')`,
				tc.kind, tc.toHost).Scan(&wrong))
			assert.Zero(t, wrong, "each message names its kind and zone, goes to the right address, never to a cancelled appointment")

			again, err := j.Run(ctx, env)
			require.NoError(t, err)
			assert.Zero(t, again.Processed, "a later run finds nothing left to send")
			assert.Len(t, sender.sent, len(due))

			// The unique key is the last line of defence: a second claim of the same
			// (appointment, kind), even from another provider or to another address, fails.
			_, err = pool.Exec(ctx, `
INSERT INTO message_deliveries (provider, channel, "to", template, payload_hash, payload)
SELECT 'other', 'EMAIL', 'someone-else@example.com', template, 'x', payload FROM message_deliveries LIMIT 1`)
			require.ErrorContains(t, err, "message_deliveries_appointment_kind_key")
		})
	}
}

func TestAppointmentMessagesDryRunClaimsNothing(t *testing.T) {
	t.Parallel()
	for _, tc := range messageJobs {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			db, pool, orgs := openAppointments(t)
			due := tc.seed(t, pool, orgs)
			sender := &appointmentSender{}
			env := jobstest.NewEnv(t, db, tc.name, apptNow)
			env.Params.DryRun = true
			st, err := tc.newJob(jobs.AppointmentSettings{BatchSize: 40}, jobs.NewPipeline(sender, jobs.SendSettings{})).Run(context.Background(), env)
			require.NoError(t, err)
			assert.EqualValues(t, len(due), st.Changed, "a dry run counts the messages it would send")
			assert.Empty(t, sender.sent)
			assert.Empty(t, deliveries(t, pool))
		})
	}
}

// waitForLockWait waits until a backend of the test's database waits on a lock.
func waitForLockWait(t *testing.T, pool *pgxpool.Pool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		var n int
		require.NoError(t, pool.QueryRow(context.Background(), `
SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`).Scan(&n))
		if n > 0 {
			return
		}
		require.True(t, time.Now().Before(deadline), "no backend started waiting on a lock within 10 s")
		time.Sleep(5 * time.Millisecond) // polling pg_stat_activity, with a deadline
	}
}

func TestAppointmentReminderNotClaimedForAnAppointmentCancelledAfterItsBatchWasRead(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, pool, orgs := openAppointments(t)
	ids := appts{n: 3, start: apptNow.Add(3 * time.Hour), step: time.Minute}.add(t, pool, orgs)

	// The application cancels ids[1] between the read of its batch (ahead, through the
	// read-only pool) and the batch's transaction, which locks and claims.
	env := jobstest.NewEnv(t, db, "appointment-reminders-day", apptNow)
	var read, cancelled atomic.Bool
	env.ReadOnly = readHook{Querier: env.ReadOnly, after: func(_ context.Context, sql string) {
		if strings.Contains(sql, "FROM appointments a") {
			read.Store(true)
		}
	}}
	tx := env.Tx
	env.Tx = func(ctx context.Context, fn func(pgx.Tx) error) error {
		if read.Load() && !cancelled.Swap(true) {
			if _, err := pool.Exec(ctx, `UPDATE appointments SET status = 'CANCELLED' WHERE id = $1`, ids[1]); err != nil {
				return err
			}
		}
		return tx(ctx, fn)
	}
	sender := &appointmentSender{}
	st, err := jobs.NewAppointmentRemindersDay(jobs.AppointmentSettings{}, jobs.NewPipeline(sender, jobs.SendSettings{})).
		Run(ctx, env)
	require.NoError(t, err)
	require.True(t, cancelled.Load(), "the cancellation landed after the batch was read")
	assert.EqualValues(t, 3, st.Processed, "the batch read holds the appointment cancelled since")
	assert.Equal(t, map[int64]int{ids[0]: 1, ids[2]: 1}, sender.perAppointment(t),
		"the appointment cancelled after its batch was read gets no reminder")
	assert.EqualValues(t, 1, st.Detail["stale"])
}

func TestNoShowDetectionThreeCopiesMarkEachOverdueAppointmentOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, pool, orgs := openAppointments(t)
	grace := 15 * time.Minute
	// Overdue: started more than the grace ago, never checked in, some long ago.
	overdue := appts{n: 200, start: apptNow.Add(-grace - time.Second), step: -7 * time.Minute}.add(t, pool, orgs)
	overdue = append(overdue, appts{n: 10, start: apptNow.Add(-90 * 24 * time.Hour), step: time.Hour}.add(t, pool, orgs)...)
	checkedIn := appts{n: 30, start: apptNow.Add(-2 * time.Hour), step: time.Minute, checkedIn: true}.add(t, pool, orgs)
	appts{n: 10, start: apptNow.Add(-grace), step: time.Second}.add(t, pool, orgs) // within the grace
	appts{n: 10, status: "CANCELLED", start: apptNow.Add(-3 * time.Hour), step: time.Minute}.add(t, pool, orgs)
	appts{n: 10, status: "COMPLETED", start: apptNow.Add(-3 * time.Hour), step: time.Minute}.add(t, pool, orgs)

	j := jobs.NewNoShowDetection(jobs.AppointmentSettings{NoShowGrace: grace, BatchSize: 25})
	require.Equal(t, "no-show-detection", j.Name())
	env := jobstest.NewEnv(t, db, j.Name(), apptNow)
	stats := runTogether(t, j, env, 3)
	var total jobcontract.Stats
	for _, st := range stats {
		total.Add(st)
	}
	t.Logf("3 runs: %+v", stats)
	assert.EqualValues(t, len(overdue), total.Changed, "each overdue appointment marked by one run")

	var marked []int64
	rows, err := pool.Query(ctx, `SELECT id FROM appointments WHERE status = 'NO_SHOW' AND no_show_at = $1 ORDER BY id`, apptNow)
	require.NoError(t, err)
	marked, err = pgxCollectIDs(rows)
	require.NoError(t, err)
	sort.Slice(overdue, func(i, j int) bool { return overdue[i] < overdue[j] })
	assert.Equal(t, overdue, marked)
	var wrong int
	require.NoError(t, pool.QueryRow(ctx, `
SELECT count(*) FROM appointments WHERE id = ANY($1) AND status <> 'BOOKED'`, checkedIn).Scan(&wrong))
	assert.Zero(t, wrong, "a checked-in appointment is never a no-show")

	again, err := j.Run(ctx, env)
	require.NoError(t, err)
	assert.Zero(t, again.Processed+again.Changed)

	_, err = pool.Exec(ctx, `UPDATE appointments SET status = 'NO_SHOW', no_show_at = now() WHERE id = $1`, checkedIn[0])
	require.ErrorContains(t, err, "check constraint", "the schema refuses a checked-in no-show whatever the code does")
}

func TestNoShowDetectionLeavesAnAppointmentCheckedInDuringTheRun(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, pool, orgs := openAppointments(t)
	ids := appts{n: 3, start: apptNow.Add(-time.Hour), step: time.Minute}.add(t, pool, orgs)

	// The contact checks in (late) in a transaction still open when the run marks.
	checkIn, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer checkIn.Rollback(ctx)
	_, err = checkIn.Exec(ctx, `UPDATE appointments SET checked_in_at = $2 WHERE id = $1`, ids[1], apptNow.Add(-time.Minute))
	require.NoError(t, err)

	done := make(chan error, 1)
	var st jobcontract.Stats
	go func() {
		var err error
		st, err = jobs.NewNoShowDetection(jobs.AppointmentSettings{}).Run(ctx, jobstest.NewEnv(t, db, "no-show-detection", apptNow))
		done <- err
	}()
	waitForLockWait(t, pool)
	require.NoError(t, checkIn.Commit(ctx))
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("the run did not finish within 10 s of the check-in's commit")
	}
	var statuses []string
	rows, err := pool.Query(ctx, `SELECT status FROM appointments WHERE id = ANY($1) ORDER BY id`, ids)
	require.NoError(t, err)
	for rows.Next() {
		var s string
		require.NoError(t, rows.Scan(&s))
		statuses = append(statuses, s)
	}
	require.NoError(t, rows.Err())
	assert.Equal(t, []string{"NO_SHOW", "BOOKED", "NO_SHOW"}, statuses)
	assert.EqualValues(t, 2, st.Changed)
	assert.EqualValues(t, 1, st.Detail["stale"])
}

func pgxCollectIDs(rows pgx.Rows) ([]int64, error) { return pgx.CollectRows(rows, pgx.RowTo[int64]) }

// idempotentSender is an appointmentSender whose provider de-duplicates on the
// Idempotency-Key (as the webhook's receiver does), so orphaned claims may be resent.
type idempotentSender struct{ appointmentSender }

func (*idempotentSender) Idempotent() bool { return true }

func TestAppointmentOrphanedClaimIsResentOnlyWhileItsWindowIsOpen(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, pool, orgs := openAppointments(t)
	// Two hour reminders claimed by a replica that died before recording them: one whose
	// appointment starts in 40 minutes, one whose appointment has started since.
	open := appts{n: 1, start: apptNow.Add(40 * time.Minute)}.add(t, pool, orgs)[0]
	started := appts{n: 1, start: apptNow.Add(-5 * time.Minute)}.add(t, pool, orgs)[0]
	_, err := pool.Exec(ctx, `
INSERT INTO message_deliveries (provider, channel, "to", template, payload_hash, payload, status, attempts, claimed_at)
SELECT 'test', 'EMAIL', 'c@example.com', 'appointment-reminder-hour', md5(id::text),
       jsonb_build_object('appointment_id', id, 'kind', 'appointment-reminder-hour'), 'PENDING', 1,
       now() - interval '1 hour'
FROM appointments WHERE id IN ($1, $2)`, open, started)
	require.NoError(t, err)

	sender := &idempotentSender{}
	j := jobs.NewAppointmentRemindersHour(jobs.AppointmentSettings{ClaimTimeout: 10 * time.Minute},
		jobs.NewPipeline(sender, jobs.SendSettings{}))
	st, err := j.Run(ctx, jobstest.NewEnv(t, db, j.Name(), apptNow))
	require.NoError(t, err)
	assert.Equal(t, map[int64]int{open: 1}, sender.perAppointment(t), "only the reminder still in its window is resent")
	assert.EqualValues(t, 1, st.Detail["orphan_resent"])
	assert.EqualValues(t, 1, st.Detail["orphan_too_late"])
	assert.EqualValues(t, 1, st.Detail["too_late"], "the expired orphan is counted as too late")
	var status, errText string
	require.NoError(t, pool.QueryRow(ctx, `
SELECT status, error FROM message_deliveries WHERE (payload ->> 'appointment_id')::bigint = $1`, started).Scan(&status, &errText))
	assert.Equal(t, "FAILED", status)
	assert.Contains(t, errText, "too late")
}

// Two transactions claiming the same reminder at the same instant (as two copies could if
// anything let both past the entity lock): one claims it, the other claims nothing, and
// neither fails on the message's second unique key.
func TestAppointmentClaimRacingForTheSameMessageClaimsItOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	_, pool, orgs := openAppointments(t)
	claim := jobs.ClaimSQLOf(jobs.NewAppointmentRemindersDay(jobs.AppointmentSettings{}, jobs.NewPipeline(&appointmentSender{}, jobs.SendSettings{})))
	const rounds = 300
	ids := appts{n: rounds, start: apptNow.Add(3 * time.Hour), step: time.Second}.add(t, pool, orgs)
	for _, id := range ids {
		start := make(chan struct{})
		claimed := make([]int, 2)
		errs := make([]error, 2)
		var wg sync.WaitGroup
		for i := range 2 {
			wg.Go(func() {
				<-start
				rows, err := pool.Query(ctx, claim, pgx.QueryExecModeExec, pgx.NamedArgs{
					"ids": []int64{id}, "now": apptNow, "kind": "appointment-reminder-day", "provider": "test"})
				if err == nil {
					var msgs []jobs.Message
					msgs, err = pgx.CollectRows(rows, jobs.ScanMessage)
					claimed[i] = len(msgs)
				}
				errs[i] = err
			})
		}
		close(start)
		wg.Wait()
		require.NoError(t, errors.Join(errs...), "appointment %d", id)
		require.Equal(t, 1, claimed[0]+claimed[1], "appointment %d is claimed once", id)
	}
}
