package seed_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schedulerhq/scheduler/internal/jobcontract"
	"github.com/schedulerhq/scheduler/internal/jobs"
	"github.com/schedulerhq/scheduler/internal/jobs/jobstest"
	"github.com/schedulerhq/scheduler/internal/seed"
	"github.com/schedulerhq/scheduler/internal/store"
	"github.com/schedulerhq/scheduler/internal/testdb"
)

func TestAppointmentsSeedsWorkForEveryAppointmentJobOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, _ := testdb.Open(t, store.Options{})

	n, err := seed.Appointments(ctx, db.Pool, 200)
	require.NoError(t, err)
	assert.Equal(t, 200, n)
	n, err = seed.Appointments(ctx, db.Pool, 200)
	require.NoError(t, err)
	assert.Zero(t, n, "seeding again adds nothing")
	n, err = seed.Appointments(ctx, db.Pool, 250)
	require.NoError(t, err)
	assert.Equal(t, 50, n, "a larger n adds only the difference")

	var orgs, zones int
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT count(*), count(DISTINCT timezone) FROM organizations`).Scan(&orgs, &zones))
	assert.Equal(t, 5, orgs)
	assert.Equal(t, 5, zones)

	// Each job has work at the database's clock, right after seeding.
	var now time.Time
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT now()`).Scan(&now))
	settings := jobs.AppointmentSettings{}
	sender := jobs.NewPipeline(jobs.NewLogSender(slog.New(slog.DiscardHandler)), jobs.SendSettings{})
	for _, j := range []jobcontract.Job{
		jobs.NewAppointmentConfirmations(settings, sender),
		jobs.NewAppointmentRemindersDay(settings, sender),
		jobs.NewAppointmentRemindersHour(settings, sender),
		jobs.NewAppointmentStartNotifications(settings, sender),
		jobs.NewNoShowDetection(settings),
		jobs.NewNoShowRecovery(settings, sender),
	} {
		st, err := j.Run(ctx, jobstest.NewEnv(t, db, j.Name(), now))
		require.NoError(t, err, j.Name())
		assert.Positive(t, st.Changed, "%s has work after seeding: %+v", j.Name(), st)
	}
	// Each organization has every kind, and a no-show rate over its threshold.
	var orgsOver int
	require.NoError(t, db.Pool.QueryRow(ctx, `
SELECT count(*) FROM (
    SELECT o.id
    FROM organizations o JOIN appointments a ON a.organization_id = o.id
    WHERE a.start_at > now() - interval '6 days' AND a.start_at < now() - interval '1 day' AND a.status <> 'CANCELLED'
    GROUP BY o.id, o.no_show_threshold
    HAVING count(*) >= 10 AND count(*) FILTER (WHERE a.status = 'NO_SHOW') >= o.no_show_threshold * count(*)
) over`).Scan(&orgsOver))
	assert.Equal(t, 5, orgsOver)

	var checkedInNoShows int
	require.NoError(t, db.Pool.QueryRow(ctx, `
SELECT count(*) FROM appointments WHERE status = 'NO_SHOW' AND checked_in_at IS NOT NULL`).Scan(&checkedInNoShows))
	assert.Zero(t, checkedInNoShows)
}
