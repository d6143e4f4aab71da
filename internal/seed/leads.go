package seed

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5/pgxpool"
)

// Leads creates the demo tenants, two forms per tenant and leads 1..n spread over them, and
// returns how many leads it inserted. Times are relative to the database's clock, by lead
// number i (mod 6):
//   - 0, 1: submitted;
//   - 2, 3: started over an hour ago and never submitted: abandon-recovery sends them a message;
//   - 4: started in the last 20 minutes, not yet abandoned;
//   - 5: abandoned over 200 days ago and already sent a message: data-retention deletes them.
//
// Channels alternate EMAIL, SMS, WHATSAPP.
func Leads(ctx context.Context, pool *pgxpool.Pool, n int) (int, error) {
	if err := ensureTenants(ctx, pool); err != nil {
		return 0, err
	}
	const forms = `
INSERT INTO forms (tenant_id, name)
SELECT t.id, f.name
FROM tenants t
CROSS JOIN (VALUES ('Free trial'), ('Contact us')) AS f (name)
WHERE t.name LIKE 'Seed tenant %'
ON CONFLICT (tenant_id, name) DO NOTHING`
	if _, err := pool.Exec(ctx, forms); err != nil {
		return 0, fmt.Errorf("seed forms: %w", err)
	}
	const leads = `
WITH form AS (
    SELECT f.id, f.tenant_id, row_number() OVER (ORDER BY f.id) - 1 AS k
    FROM forms f JOIN tenants t ON t.id = f.tenant_id
    WHERE t.name LIKE 'Seed tenant %'
),
g AS (
    SELECT i, i % 6 AS kind, now() - (i % 1000) * interval '1 minute' AS t0
    FROM generate_series(1, $1::int) AS i
),
lead AS (
    SELECT g.i, g.kind, f.id AS form_id, f.tenant_id,
           CASE g.kind
               WHEN 2 THEN g.t0 - interval '1 hour'
               WHEN 3 THEN g.t0 - interval '1 hour'
               WHEN 4 THEN now() - (g.i % 20) * interval '1 minute'
               WHEN 5 THEN g.t0 - interval '200 days'
               ELSE g.t0 - interval '10 minutes'
           END AS started_at
    FROM g
    JOIN form f ON f.k = g.i % (SELECT count(*) FROM form)
)
INSERT INTO leads (form_id, tenant_id, session_id, email, phone, channel, started_at, submitted_at,
                   abandoned_at, recovery_sent_at)
SELECT form_id, tenant_id, 'seed-lead-' || i, 'lead-' || i || '@seed.example', '+1555' || lpad(i::text, 7, '0'),
       (ARRAY['EMAIL', 'SMS', 'WHATSAPP'])[1 + i % 3], started_at,
       CASE WHEN kind IN (0, 1) THEN started_at + interval '5 minutes' END,
       CASE WHEN kind = 5 THEN started_at + interval '30 minutes' END,
       CASE WHEN kind = 5 THEN started_at + interval '30 minutes' END
FROM lead
ORDER BY i
ON CONFLICT (session_id) DO NOTHING`
	tag, err := pool.Exec(ctx, leads, n)
	if err != nil {
		return 0, fmt.Errorf("seed %d leads: %w", n, err)
	}
	return int(tag.RowsAffected()), nil
}
