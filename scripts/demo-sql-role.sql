-- The demo SQL job's role (make run): SQL jobs run as SCHEDULER_SQL_ROLE, with its privileges
-- only. Here it may read members and append to demo_member_counts, nothing else.
DO $$
BEGIN
    IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'scheduler_demo_jobs') THEN
        CREATE ROLE scheduler_demo_jobs NOLOGIN;
    END IF;
END $$;
GRANT scheduler_demo_jobs TO CURRENT_USER;
CREATE TABLE IF NOT EXISTS demo_member_counts (
    counted_for timestamptz NOT NULL,
    status      text NOT NULL,
    members     bigint NOT NULL,
    PRIMARY KEY (counted_for, status)
);
GRANT SELECT ON members TO scheduler_demo_jobs;
GRANT INSERT ON demo_member_counts TO scheduler_demo_jobs;
