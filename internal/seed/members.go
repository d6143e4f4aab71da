// Package seed fills a database with demo data for `scheduler seed` and the benchmarks:
// tenants with members due for a plan change or expired, and leads that abandoned a form.
// Every function is set-based (generate_series), so a million rows take seconds, and
// idempotent: rows have fixed natural keys and are inserted ON CONFLICT DO NOTHING, so a
// second run with the same n adds nothing and one with a larger n adds only the difference.
package seed

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5/pgxpool"
)

// Tenants is the number of demo tenants the members and leads are spread over.
const Tenants = 5

// ensureTenants creates the demo tenants and their plans.
func ensureTenants(ctx context.Context, pool *pgxpool.Pool) error {
	const tenants = `
INSERT INTO tenants (name)
SELECT 'Seed tenant ' || k FROM generate_series(1, $1::int) AS k
ON CONFLICT (name) DO NOTHING`
	const plans = `
INSERT INTO membership_plans (tenant_id, name, price, duration_days)
SELECT t.id, p.name, p.price, p.days
FROM tenants t
CROSS JOIN (VALUES ('Basic', 29.00, 30), ('Standard', 49.00, 90), ('Premium', 99.00, 365)) AS p (name, price, days)
WHERE t.name LIKE 'Seed tenant %'
ON CONFLICT (tenant_id, name) DO NOTHING`
	if _, err := pool.Exec(ctx, tenants, Tenants); err != nil {
		return fmt.Errorf("seed tenants: %w", err)
	}
	if _, err := pool.Exec(ctx, plans); err != nil {
		return fmt.Errorf("seed plans: %w", err)
	}
	return nil
}

// Members creates the demo tenants and plans and members 1..n spread over them, and returns
// how many members it inserted. Dates are relative to the database's current UTC date, by
// member number i (mod 10):
//   - 0: a pending plan change that is due (starts today or up to 2 days ago): plan-change applies it;
//   - 1: a pending plan change starting in the future: left alone;
//   - 2, 3: ACTIVE with an end date in the past: status-sync deactivates them;
//   - 4..8: ACTIVE and current;
//   - 9: INACTIVE, long expired.
func Members(ctx context.Context, pool *pgxpool.Pool, n int) (int, error) {
	if err := ensureTenants(ctx, pool); err != nil {
		return 0, err
	}
	// Each tenant's plans are packed into arrays, so that a member picks its plans by index
	// instead of through a join (which made the 1M-row insert several times slower).
	const q = `
WITH tenant AS (
    SELECT t.id, row_number() OVER (ORDER BY t.id) - 1 AS k,
           array_agg(p.id ORDER BY p.id) AS plan_ids,
           array_agg(p.price ORDER BY p.id) AS prices,
           array_agg(p.duration_days ORDER BY p.id) AS days
    FROM tenants t
    JOIN membership_plans p ON p.tenant_id = t.id
    WHERE t.name LIKE 'Seed tenant %'
    GROUP BY t.id
),
m AS (
    SELECT i, i % 10 AS kind, t.id AS tenant_id,
           t.plan_ids[1 + i % 3] AS plan_id, t.days[1 + i % 3] AS days,
           t.plan_ids[1 + (i + 1) % 3] AS next_plan_id, t.prices[1 + (i + 1) % 3] AS next_price,
           t.days[1 + (i + 1) % 3] AS next_days,
           (now() AT TIME ZONE 'UTC')::date AS today
    FROM generate_series(1, $1::int) AS i
    JOIN tenant t ON t.k = i % $2::int
),
dated AS (
    SELECT *,
           CASE kind
               WHEN 2 THEN today - 1 - i % 90
               WHEN 3 THEN today - 1 - i % 90
               WHEN 9 THEN today - 100 - i % 300
               ELSE today + 1 + i % 365
           END AS end_date,
           CASE kind
               WHEN 0 THEN today - i % 3
               WHEN 1 THEN today + 1 + i % 60
           END AS next_start
    FROM m
)
INSERT INTO members (tenant_id, email, status, membership_plan_id, membership_start_date, membership_end_date,
                     pending_membership_plan_id, pending_membership_start_date, pending_membership_end_date,
                     pending_membership_price)
SELECT tenant_id, 'member-' || i || '@seed.example',
       CASE WHEN kind = 9 THEN 'INACTIVE' ELSE 'ACTIVE' END,
       plan_id, end_date - days, end_date,
       CASE WHEN next_start IS NOT NULL THEN next_plan_id END,
       next_start, next_start + next_days,
       CASE WHEN next_start IS NOT NULL THEN next_price END
FROM dated
ON CONFLICT (tenant_id, email) DO NOTHING`
	tag, err := pool.Exec(ctx, q, n, Tenants)
	if err != nil {
		return 0, fmt.Errorf("seed %d members: %w", n, err)
	}
	return int(tag.RowsAffected()), nil
}
