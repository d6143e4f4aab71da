package jobs_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schedulerhq/scheduler/internal/jobcontract"
	"github.com/schedulerhq/scheduler/internal/jobs"
	"github.com/schedulerhq/scheduler/internal/store"
	"github.com/schedulerhq/scheduler/internal/testdb"
)

// seedMemberships creates 4 tenants and members spread over them (member i in tenant i % 4):
// `expired` ACTIVE members whose end date is before today, then ACTIVE members ending today,
// INACTIVE members long expired and ACTIVE members ending later (`others` of each). It returns
// the expired count per tenant id.
func seedMemberships(t *testing.T, pool *pgxpool.Pool, expired, others int) map[string]int64 {
	t.Helper()
	ctx := context.Background()
	_, err := pool.Exec(ctx, `INSERT INTO tenants (name) SELECT 'tenant ' || k FROM generate_series(0, 3) k`)
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `
WITH tenant AS (SELECT id, id - (SELECT min(id) FROM tenants) AS k FROM tenants)
INSERT INTO members (tenant_id, email, status, membership_start_date, membership_end_date)
SELECT t.id, 'm' || i,
       CASE WHEN i > $2::int + $3::int AND i <= $2::int + 2 * $3::int THEN 'INACTIVE' ELSE 'ACTIVE' END,
       $1::date - 400,
       CASE WHEN i <= $2::int THEN $1::date - 1 - i % 200
            WHEN i <= $2::int + $3::int THEN $1::date
            WHEN i <= $2::int + 2 * $3::int THEN $1::date - 1 - i % 200
            ELSE $1::date + 1 + i % 200 END
FROM generate_series(1, $2::int + 3 * $3::int) AS i
JOIN tenant t ON t.k = i % 4`, runNow, expired, others)
	require.NoError(t, err)
	rows, err := pool.Query(ctx, `
SELECT 'tenant:' || tenant_id, count(*) FROM members
WHERE status = 'ACTIVE' AND membership_end_date < $1::date GROUP BY tenant_id`, runNow)
	require.NoError(t, err)
	perTenant := map[string]int64{}
	for rows.Next() {
		var tenant string
		var n int64
		require.NoError(t, rows.Scan(&tenant, &n))
		perTenant[tenant] = n
	}
	require.NoError(t, rows.Err())
	require.Len(t, perTenant, 4)
	return perTenant
}

func TestStatusSyncConcurrentRunsDeactivateEachMemberOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, _ := testdb.Open(t, store.Options{})
	const expired = 10_000
	wantPerTenant := seedMemberships(t, db.Pool, expired, 1_000)
	_, err := db.Pool.Exec(ctx, `
CREATE TABLE expected AS SELECT id FROM members WHERE status = 'ACTIVE' AND membership_end_date < $1::date`, runNow)
	require.NoError(t, err)
	untouched := memberState(t, db.Pool, `id NOT IN (SELECT id FROM expected)`)

	env := newEnv(t, db, "status-sync")
	stats := runTogether(t, jobs.NewStatusSync(), env, 5)

	var total jobcontract.Stats
	for i, st := range stats {
		assert.Zero(t, st.Errors, "run %d", i)
		assert.Equal(t, st.Processed, st.Changed+st.SkippedLocked+st.Detail["stale"], "run %d", i)
		total.Add(st)
	}
	t.Logf("5 runs: %+v", stats)
	assert.EqualValues(t, expired, total.Changed, "the runs together deactivated every expired member once")
	for tenant, n := range wantPerTenant {
		assert.Equal(t, n, total.Detail[tenant], tenant)
	}
	var stillActive, inactive int
	require.NoError(t, db.Pool.QueryRow(ctx, `
SELECT count(*) FILTER (WHERE m.status = 'ACTIVE'), count(*) FILTER (WHERE m.status = 'INACTIVE')
FROM expected e JOIN members m USING (id)`).Scan(&stillActive, &inactive))
	assert.Zero(t, stillActive)
	assert.Equal(t, expired, inactive)
	assert.Equal(t, untouched, memberState(t, db.Pool, `id NOT IN (SELECT id FROM expected)`),
		"members ending today or later, and those already inactive, are untouched")

	again, err := jobs.NewStatusSync().Run(ctx, env)
	require.NoError(t, err)
	assert.Zero(t, again.Processed, "nothing is expired and active any more")
}

func TestStatusSyncSkipsLockedMemberAndDryRunChangesNothing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, _ := testdb.Open(t, store.Options{})
	seedMemberships(t, db.Pool, 1_500, 10)
	before := memberState(t, db.Pool, "true")

	env := newEnv(t, db, "status-sync")
	env.Params.DryRun = true
	st, err := jobs.NewStatusSync().Run(ctx, env)
	require.NoError(t, err)
	assert.EqualValues(t, 1_500, st.Processed)
	assert.EqualValues(t, 1_500, st.Changed, "a dry run counts what it would change")
	assert.Equal(t, before, memberState(t, db.Pool, "true"), "a dry run changes nothing")

	var lockedID int64
	require.NoError(t, db.Pool.QueryRow(ctx, `
SELECT id FROM members WHERE status = 'ACTIVE' AND membership_end_date < $1::date ORDER BY id LIMIT 1`, runNow).Scan(&lockedID))
	holdLock(t, db, "status-sync", lockedID)
	env.Params.DryRun = false
	st, err = jobs.NewStatusSync().Run(ctx, env)
	require.NoError(t, err)
	assert.EqualValues(t, 1, st.SkippedLocked)
	assert.EqualValues(t, 1_499, st.Changed)
	var status string
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT status FROM members WHERE id = $1`, lockedID).Scan(&status))
	assert.Equal(t, "ACTIVE", status, "the member locked by another transaction is left for the next run")
}
