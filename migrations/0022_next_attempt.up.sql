-- When a retrying run's next call attempt starts (issue 34): set, fenced by the leader's epoch,
-- when a runtime HTTP job's failed attempt is followed by a backoff wait; cleared when the
-- next attempt starts and when the run ends. NULL otherwise. Nullable without a default, so
-- adding it to the partitioned table rewrites no row.
ALTER TABLE job_runs ADD COLUMN next_attempt_at timestamptz;
