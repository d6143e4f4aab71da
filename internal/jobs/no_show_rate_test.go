package jobs_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schedulerhq/scheduler/internal/jobs"
	"github.com/schedulerhq/scheduler/internal/jobs/jobstest"
)

// rateNotice is the payload of a no-show-rate notice.
type rateNotice struct {
	OrganizationID int64     `json:"organization_id"`
	Kind           string    `json:"kind"`
	LocalDate      string    `json:"local_date"`
	From           time.Time `json:"from"`
	To             time.Time `json:"to"`
	Appointments   int       `json:"appointments"`
	NoShows        int       `json:"no_shows"`
	Rate           float64   `json:"rate"`
}

func (s *appointmentSender) notices(t *testing.T) []rateNotice {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []rateNotice
	for _, m := range s.sent {
		var n rateNotice
		require.NoError(t, json.Unmarshal(m.Payload, &n))
		out = append(out, n)
	}
	return out
}

// addAt inserts one appointment of org starting at start with status.
func addAt(t *testing.T, pool *pgxpool.Pool, org int64, start time.Time, status string) {
	t.Helper()
	_, err := pool.Exec(context.Background(), `
INSERT INTO appointments (organization_id, contact_email, host_email, start_at, end_at, status, booked_at, no_show_at)
VALUES ($1, 'c@example.com', 'h@example.com', $2, $2::timestamptz + interval '30 minutes', $3,
        $2::timestamptz - interval '2 days', CASE WHEN $3 = 'NO_SHOW' THEN $2::timestamptz + interval '15 minutes' END)`,
		org, start, status)
	require.NoError(t, err)
}

// TestNoShowRateCountsTheLastSevenLocalDaysAcrossDST checks the window of the rate in three
// zones whose last 7 local days hold a DST change: a spring-forward gap in Paris (a 23-hour
// day), a fall-back overlap in New York (25 hours) and Lord Howe's 30-minute gap. Each
// organization has 10 appointments in its window, 2 of them no-shows (exactly its 20 %
// threshold), cancelled ones that do not count, and decoys just outside either end, so a
// window off by any DST offset gives other counts.
func TestNoShowRateCountsTheLastSevenLocalDaysAcrossDST(t *testing.T) {
	t.Parallel()
	utc := func(s string) time.Time {
		v, err := time.Parse(time.RFC3339, s)
		require.NoError(t, err)
		return v
	}
	for _, tc := range []struct {
		zone      string
		now       time.Time // 08:00 local
		localDate string
		from, to  time.Time // local midnight 7 days before, and today
	}{
		{"Europe/Paris", utc("2026-03-30T06:00:00Z"), "2026-03-30", utc("2026-03-22T23:00:00Z"), utc("2026-03-29T22:00:00Z")},
		{"America/New_York", utc("2026-11-02T13:00:00Z"), "2026-11-02", utc("2026-10-26T04:00:00Z"), utc("2026-11-02T05:00:00Z")},
		{"Australia/Lord_Howe", utc("2026-10-04T21:00:00Z"), "2026-10-05", utc("2026-09-27T13:30:00Z"), utc("2026-10-04T13:00:00Z")},
	} {
		t.Run(tc.zone, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			db, pool, _ := openAppointments(t)
			var org int64
			require.NoError(t, pool.QueryRow(ctx, `SELECT id FROM organizations WHERE timezone = $1`, tc.zone).Scan(&org))

			addAt(t, pool, org, tc.from, "NO_SHOW")
			addAt(t, pool, org, tc.to.Add(-time.Minute), "NO_SHOW")
			span := tc.to.Sub(tc.from)
			for i := 1; i <= 8; i++ {
				addAt(t, pool, org, tc.from.Add(span*time.Duration(i)/9), "COMPLETED")
				if i%3 == 0 {
					addAt(t, pool, org, tc.from.Add(span*time.Duration(i)/9+time.Hour), "CANCELLED")
				}
			}
			addAt(t, pool, org, tc.from.Add(-time.Minute), "COMPLETED")
			addAt(t, pool, org, tc.from.Add(-30*time.Minute), "NO_SHOW")
			addAt(t, pool, org, tc.to, "NO_SHOW")
			addAt(t, pool, org, tc.to.Add(30*time.Minute), "COMPLETED")

			// An hour before the 08:00 local hour: nothing yet.
			sender := &appointmentSender{}
			j := jobs.NewNoShowRate(jobs.AppointmentSettings{}, jobs.NewPipeline(sender, jobs.SendSettings{}))
			env := jobstest.NewEnv(t, db, j.Name(), tc.now)
			st, err := j.Run(ctx, jobstest.At(env, tc.now.Add(-time.Hour)))
			require.NoError(t, err)
			assert.Empty(t, sender.sent)

			// In it, three copies at once: one notice.
			stats := runTogether(t, j, jobstest.At(env, tc.now.Add(59*time.Minute)), 3)
			t.Logf("3 runs: %+v", stats)
			notices := sender.notices(t)
			require.Len(t, notices, 1)
			n := notices[0]
			assert.Equal(t, org, n.OrganizationID)
			assert.Equal(t, "no-show-rate", n.Kind)
			assert.Equal(t, tc.localDate, n.LocalDate)
			assert.True(t, tc.from.Equal(n.From), "from %s, want %s", n.From, tc.from)
			assert.True(t, tc.to.Equal(n.To), "to %s, want %s", n.To, tc.to)
			assert.Equal(t, 10, n.Appointments)
			assert.Equal(t, 2, n.NoShows)
			assert.InDelta(t, 0.2, n.Rate, 1e-9)
			var to string
			require.NoError(t, pool.QueryRow(ctx, `SELECT "to" FROM message_deliveries`).Scan(&to))
			assert.Contains(t, to, "admin@")

			// The hour after: not sent again, and nothing is too late.
			st, err = j.Run(ctx, jobstest.At(env, tc.now.Add(time.Hour)))
			require.NoError(t, err)
			assert.Len(t, sender.sent, 1)
			assert.Zero(t, st.Detail["too_late"])
		})
	}
}

// TestNoShowRateOneNoticePerLocalDateAtEightLocal runs the job every hour, as scheduled,
// through the DST changes of 2026 in four zones, with every organization over its threshold
// every day: each organization gets exactly one notice per local date, sent by the run
// during its 08:00 local hour.
func TestNoShowRateOneNoticePerLocalDateAtEightLocal(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, pool, orgs := openAppointments(t)
	// Every 2 hours, one in three a no-show (33 %, over the 20 % threshold).
	_, err := pool.Exec(ctx, `
INSERT INTO appointments (organization_id, contact_email, host_email, start_at, end_at, status, booked_at, no_show_at)
SELECT o, 'c@example.com', 'h@example.com', t, t + interval '30 minutes',
       CASE WHEN n % 3 = 0 THEN 'NO_SHOW' ELSE 'COMPLETED' END, t - interval '2 days',
       CASE WHEN n % 3 = 0 THEN t + interval '15 minutes' END
FROM unnest($1::bigint[]) AS o,
     generate_series(timestamptz '2026-02-20', timestamptz '2026-11-10', interval '2 hours') WITH ORDINALITY AS g (t, n)`, orgs)
	require.NoError(t, err)

	zones := map[int64]*time.Location{}
	for i, id := range orgs {
		loc, err := time.LoadLocation(apptZones[i])
		require.NoError(t, err)
		zones[id] = loc
	}
	sender := &appointmentSender{}
	j := jobs.NewNoShowRate(jobs.AppointmentSettings{}, jobs.NewPipeline(sender, jobs.SendSettings{}))
	env := newEnv(t, db, j.Name())
	type orgDate struct {
		org  int64
		date string
	}
	want := map[orgDate]bool{}
	spans := [][2]string{
		{"2026-03-06", "2026-03-10"}, // New York's gap (03-08)
		{"2026-03-27", "2026-04-07"}, // Paris's gap (03-29), Lord Howe's overlap (04-05)
		{"2026-10-02", "2026-10-06"}, // Lord Howe's gap (10-04)
		{"2026-10-23", "2026-10-27"}, // Paris's overlap (10-25)
		{"2026-10-30", "2026-11-03"}, // New York's overlap (11-01)
	}
	for _, span := range spans {
		from, _ := time.Parse(time.DateOnly, span[0])
		to, _ := time.Parse(time.DateOnly, span[1])
		for now := from; now.Before(to); now = now.Add(time.Hour) {
			before := len(sender.sent)
			st, err := j.Run(ctx, jobstest.At(env, now))
			require.NoError(t, err)
			require.Zero(t, st.Detail["too_late"], "at %s", now)
			for _, n := range sender.notices(t)[before:] {
				local := now.In(zones[n.OrganizationID])
				assert.Equal(t, 8, local.Hour(), "org %d notified at %s local", n.OrganizationID, local)
				assert.Equal(t, local.Format(time.DateOnly), n.LocalDate)
			}
			for id, loc := range zones {
				if now.In(loc).Hour() == 8 {
					want[orgDate{id, now.In(loc).Format(time.DateOnly)}] = true
				}
			}
		}
	}
	got := map[orgDate]int{}
	for _, n := range sender.notices(t) {
		got[orgDate{n.OrganizationID, n.LocalDate}]++
	}
	assert.Len(t, got, len(want))
	for k := range want {
		assert.Equal(t, 1, got[k], "organization %d, local date %s", k.org, k.date)
	}
}

func TestNoShowRateCountsAMissedEightOClockAsTooLate(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, pool, orgs := openAppointments(t)
	paris := orgs[0]
	now := time.Date(2026, 3, 30, 7, 0, 0, 0, time.UTC) // 09:00 in Paris
	for i := range 10 {
		status := "COMPLETED"
		if i < 5 {
			status = "NO_SHOW"
		}
		addAt(t, pool, paris, now.Add(-time.Duration(i+10)*time.Hour), status)
	}
	_, err := pool.Exec(ctx, `INSERT INTO organizations (name, timezone, admin_email) VALUES ('nowhere', 'Mars/Olympus_Mons', 'a@example.com')`)
	require.NoError(t, err)

	sender := &appointmentSender{}
	st, err := jobs.NewNoShowRate(jobs.AppointmentSettings{}, jobs.NewPipeline(sender, jobs.SendSettings{})).Run(ctx, jobstest.NewEnv(t, db, "no-show-rate", now))
	require.NoError(t, err)
	assert.Empty(t, sender.sent, "the 08:00 notice is not sent at 09:00")
	assert.EqualValues(t, 1, st.Detail["too_late"])
	assert.EqualValues(t, 1, st.Detail["bad_timezone"])
}
