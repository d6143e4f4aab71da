-- The demo SQL job's target (make run): a login of its own in the scheduler's database, which
-- may read members and append to demo_member_counts, and nothing of the scheduler's.
-- psql -v password=... sets its password. `scheduler sql-target init DEMO --admin-url ...`
-- then creates its marker schema, scheduler_markers_scheduler_demo_jobs, owned by it.
DO $$
BEGIN
    IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'scheduler_demo_jobs') THEN
        CREATE ROLE scheduler_demo_jobs LOGIN;
    END IF;
END $$;
ALTER ROLE scheduler_demo_jobs LOGIN PASSWORD :'password';
CREATE TABLE IF NOT EXISTS demo_member_counts (
    counted_for timestamptz NOT NULL,
    status      text NOT NULL,
    members     bigint NOT NULL,
    PRIMARY KEY (counted_for, status)
);
GRANT SELECT ON members TO scheduler_demo_jobs;
GRANT INSERT ON demo_member_counts TO scheduler_demo_jobs;
