package seed_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schedulerhq/scheduler/internal/seed"
	"github.com/schedulerhq/scheduler/internal/store"
	"github.com/schedulerhq/scheduler/internal/testdb"
)

func TestMembersSeedsARealisticMixOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, _ := testdb.Open(t, store.Options{})

	n, err := seed.Members(ctx, db.Pool, 1000)
	require.NoError(t, err)
	assert.Equal(t, 1000, n)
	n, err = seed.Members(ctx, db.Pool, 1000)
	require.NoError(t, err)
	assert.Zero(t, n, "seeding again adds nothing")
	n, err = seed.Members(ctx, db.Pool, 1200)
	require.NoError(t, err)
	assert.Equal(t, 200, n, "a larger n adds only the difference")

	var members, tenants, plans, due, future, expired, inactive int
	require.NoError(t, db.Pool.QueryRow(ctx, `
SELECT count(*), count(DISTINCT tenant_id),
       (SELECT count(*) FROM membership_plans),
       count(*) FILTER (WHERE pending_membership_plan_id IS NOT NULL
                        AND pending_membership_start_date <= (now() AT TIME ZONE 'UTC')::date),
       count(*) FILTER (WHERE pending_membership_start_date > (now() AT TIME ZONE 'UTC')::date),
       count(*) FILTER (WHERE status = 'ACTIVE' AND membership_end_date < (now() AT TIME ZONE 'UTC')::date),
       count(*) FILTER (WHERE status = 'INACTIVE')
FROM members`).Scan(&members, &tenants, &plans, &due, &future, &expired, &inactive))
	assert.Equal(t, 1200, members)
	assert.Equal(t, seed.Tenants, tenants)
	assert.Equal(t, 3*seed.Tenants, plans)
	assert.Equal(t, 120, due, "one in ten has a due plan change")
	assert.Equal(t, 120, future, "one in ten has a future plan change")
	assert.Equal(t, 240, expired, "two in ten are ACTIVE past their end date")
	assert.Equal(t, 120, inactive)

	var foreignPlans int
	require.NoError(t, db.Pool.QueryRow(ctx, `
SELECT count(*) FROM members m
JOIN membership_plans p ON p.id IN (m.membership_plan_id, m.pending_membership_plan_id)
WHERE p.tenant_id <> m.tenant_id`).Scan(&foreignPlans))
	assert.Zero(t, foreignPlans, "members only get their own tenant's plans")
}

func TestLeadsSeedsAbandonedLeadsOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, _ := testdb.Open(t, store.Options{})

	n, err := seed.Leads(ctx, db.Pool, 600)
	require.NoError(t, err)
	assert.Equal(t, 600, n)
	n, err = seed.Leads(ctx, db.Pool, 600)
	require.NoError(t, err)
	assert.Zero(t, n, "seeding again adds nothing")

	var submitted, abandonable, recent, old, forms int
	require.NoError(t, db.Pool.QueryRow(ctx, `
SELECT count(*) FILTER (WHERE submitted_at IS NOT NULL),
       count(*) FILTER (WHERE submitted_at IS NULL AND abandoned_at IS NULL AND started_at <= now() - interval '30 minutes'),
       count(*) FILTER (WHERE submitted_at IS NULL AND started_at > now() - interval '30 minutes'),
       count(*) FILTER (WHERE abandoned_at < now() - interval '180 days'),
       (SELECT count(*) FROM forms)
FROM leads`).Scan(&submitted, &abandonable, &recent, &old, &forms))
	assert.Equal(t, 200, submitted)
	assert.Equal(t, 200, abandonable)
	assert.Equal(t, 100, recent)
	assert.Equal(t, 100, old)
	assert.Equal(t, 2*seed.Tenants, forms)
}
