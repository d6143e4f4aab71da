package jobs_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schedulerhq/scheduler/internal/jobcontract"
	"github.com/schedulerhq/scheduler/internal/jobs"
	"github.com/schedulerhq/scheduler/internal/store"
	"github.com/schedulerhq/scheduler/internal/testdb"
)

// seedPlanChanges creates 3 tenants with two plans each and members numbered 1..due+notDue+none
// (member i in tenant i % 3): the first `due` have a pending plan starting today or up to 4
// days before, the next `notDue` one starting after today, the last `none` no pending plan.
// It returns the due count per tenant id.
func seedPlanChanges(t *testing.T, pool *pgxpool.Pool, due, notDue, none int) map[string]int64 {
	t.Helper()
	ctx := context.Background()
	_, err := pool.Exec(ctx, `
INSERT INTO tenants (name) SELECT 'tenant ' || k FROM generate_series(0, 2) k;
INSERT INTO membership_plans (tenant_id, name, price, duration_days)
SELECT t.id, p.name, p.price, p.days FROM tenants t
CROSS JOIN (VALUES ('old', 10, 30), ('new', 20, 365)) AS p (name, price, days)`)
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `
WITH plan AS (
    SELECT t.id AS tenant_id, (t.id - (SELECT min(id) FROM tenants)) AS k,
           o.id AS old_id, n.id AS new_id
    FROM tenants t
    JOIN membership_plans o ON o.tenant_id = t.id AND o.name = 'old'
    JOIN membership_plans n ON n.tenant_id = t.id AND n.name = 'new'
)
INSERT INTO members (tenant_id, email, membership_plan_id, membership_start_date, membership_end_date,
                     pending_membership_plan_id, pending_membership_start_date, pending_membership_end_date,
                     pending_membership_price)
SELECT p.tenant_id, 'm' || i, p.old_id, $1::date - 30, $1::date + 30,
       CASE WHEN i <= $2::int + $3::int THEN p.new_id END,
       CASE WHEN i <= $2::int THEN $1::date - i % 5 WHEN i <= $2::int + $3::int THEN $1::date + 1 + i % 5 END,
       CASE WHEN i <= $2::int THEN $1::date - i % 5 + 365 WHEN i <= $2::int + $3::int THEN $1::date + 366 END,
       CASE WHEN i <= $2::int + $3::int THEN 20 END
FROM generate_series(1, $2::int + $3::int + $4::int) AS i
JOIN plan p ON p.k = i % 3`, runNow, due, notDue, none)
	require.NoError(t, err)
	rows, err := pool.Query(ctx, `
SELECT tenant_id::text, count(*) FROM members
WHERE pending_membership_plan_id IS NOT NULL AND pending_membership_start_date <= $1::date
GROUP BY tenant_id`, runNow)
	require.NoError(t, err)
	perTenant := map[string]int64{}
	for rows.Next() {
		var tenant string
		var n int64
		require.NoError(t, rows.Scan(&tenant, &n))
		perTenant["tenant:"+tenant] = n
	}
	require.NoError(t, rows.Err())
	return perTenant
}

// memberState is a digest of every member's plan columns, to show what a run left untouched.
func memberState(t *testing.T, pool *pgxpool.Pool, where string) string {
	t.Helper()
	var digest string
	require.NoError(t, pool.QueryRow(context.Background(), fmt.Sprintf(`
SELECT coalesce(md5(string_agg(concat_ws(',', id, status, membership_plan_id, membership_start_date,
       membership_end_date, pending_membership_plan_id, pending_membership_start_date,
       pending_membership_end_date, pending_membership_price), ';' ORDER BY id)), '')
FROM members WHERE %s`, where)).Scan(&digest))
	return digest
}

func TestPlanChangeConcurrentRunsApplyEachChangeOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, _ := testdb.Open(t, store.Options{})
	const due = 10_000
	wantPerTenant := seedPlanChanges(t, db.Pool, due, 2_000, 1_000)
	// Remember what each due member must become.
	_, err := db.Pool.Exec(ctx, `
CREATE TABLE expected AS
SELECT id, pending_membership_plan_id AS plan_id, pending_membership_start_date AS start_date,
       pending_membership_end_date AS end_date, membership_plan_id AS from_plan_id
FROM members WHERE pending_membership_start_date <= $1::date`, runNow)
	require.NoError(t, err)
	untouched := memberState(t, db.Pool, `pending_membership_start_date > '2026-03-15' OR pending_membership_plan_id IS NULL`)

	env := newEnv(t, db, "plan-change")
	stats := runTogether(t, jobs.NewPlanChange(), env, 5)

	var total jobcontract.Stats
	for i, st := range stats {
		assert.Zero(t, st.Errors, "run %d", i)
		assert.Equal(t, st.Processed, st.Changed+st.SkippedLocked+st.Detail["stale"],
			"run %d: every member it read was changed, skipped as locked, or found already changed", i)
		total.Add(st)
	}
	t.Logf("5 runs: %+v", stats)
	assert.EqualValues(t, due, total.Changed, "the runs together changed every due member once")
	for tenant, n := range wantPerTenant {
		assert.Equal(t, n, total.Detail[tenant], tenant)
	}

	var historyRows, members, wrong int
	require.NoError(t, db.Pool.QueryRow(ctx, `
SELECT count(*), count(DISTINCT member_id) FROM member_plan_change_history`).Scan(&historyRows, &members))
	assert.Equal(t, due, historyRows, "exactly one history row per due member")
	assert.Equal(t, due, members)
	require.NoError(t, db.Pool.QueryRow(ctx, `
SELECT count(*) FROM expected e
LEFT JOIN members m ON m.id = e.id
LEFT JOIN member_plan_change_history h ON h.member_id = e.id
WHERE m.membership_plan_id IS DISTINCT FROM e.plan_id
   OR m.membership_start_date IS DISTINCT FROM e.start_date
   OR m.membership_end_date IS DISTINCT FROM e.end_date
   OR m.pending_membership_plan_id IS NOT NULL OR m.pending_membership_start_date IS NOT NULL
   OR m.pending_membership_end_date IS NOT NULL OR m.pending_membership_price IS NOT NULL
   OR h.change_type IS DISTINCT FROM 'APPLIED' OR h.from_plan_id IS DISTINCT FROM e.from_plan_id
   OR h.to_plan_id IS DISTINCT FROM e.plan_id OR h.effective_date IS DISTINCT FROM e.start_date
   OR h.run_id IS DISTINCT FROM $1`, env.RunID).Scan(&wrong))
	assert.Zero(t, wrong, "due members moved to their pending plan, pending cleared, history right")
	assert.Equal(t, untouched, memberState(t, db.Pool, `id NOT IN (SELECT id FROM expected)`),
		"members without a due change are untouched")

	again, err := jobs.NewPlanChange().Run(ctx, env)
	require.NoError(t, err)
	assert.Zero(t, again.Processed, "nothing is due any more")
}

func TestPlanChangeSkipsLockedAndAlreadyAppliedMembers(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, _ := testdb.Open(t, store.Options{})
	seedPlanChanges(t, db.Pool, 3, 0, 0)
	var ids []int64
	rows, err := db.Pool.Query(ctx, `SELECT id FROM members ORDER BY id`)
	require.NoError(t, err)
	for rows.Next() {
		var id int64
		require.NoError(t, rows.Scan(&id))
		ids = append(ids, id)
	}
	require.NoError(t, rows.Err())
	locked, applied := ids[0], ids[1]
	// applied already has its change for this date in the history (applied by an older run
	// whose member update was lost): it must not be applied a second time.
	_, err = db.Pool.Exec(ctx, `
INSERT INTO member_plan_change_history (member_id, from_plan_id, to_plan_id, change_type, effective_date)
SELECT id, membership_plan_id, pending_membership_plan_id, 'APPLIED', pending_membership_start_date
FROM members WHERE id = $1`, applied)
	require.NoError(t, err)
	holdLock(t, db, "plan-change", locked)

	env := newEnv(t, db, "plan-change")
	st, err := jobs.NewPlanChange().Run(ctx, env)
	require.NoError(t, err)
	assert.EqualValues(t, 3, st.Processed)
	assert.EqualValues(t, 1, st.SkippedLocked, "the member locked elsewhere is skipped")
	assert.EqualValues(t, 1, st.Detail["stale"], "the member already applied for that date is refused by the guard")
	assert.EqualValues(t, 1, st.Changed)
	var pending int
	require.NoError(t, db.Pool.QueryRow(ctx,
		`SELECT count(*) FROM members WHERE pending_membership_plan_id IS NOT NULL AND id = ANY($1)`,
		[]int64{locked, applied}).Scan(&pending))
	assert.Equal(t, 2, pending)
	var history int
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT count(*) FROM member_plan_change_history`).Scan(&history))
	assert.Equal(t, 2, history)
}

func TestPlanChangeDryRunChangesNothing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, _ := testdb.Open(t, store.Options{})
	seedPlanChanges(t, db.Pool, 2_500, 100, 100)
	before := memberState(t, db.Pool, "true")

	env := newEnv(t, db, "plan-change")
	env.Params.DryRun = true
	st, err := jobs.NewPlanChange().Run(ctx, env)
	require.NoError(t, err)
	assert.EqualValues(t, 2_500, st.Processed)
	assert.EqualValues(t, 2_500, st.Changed, "a dry run counts what it would change")
	assert.Equal(t, before, memberState(t, db.Pool, "true"))
	var history int
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT count(*) FROM member_plan_change_history`).Scan(&history))
	assert.Zero(t, history)
}
