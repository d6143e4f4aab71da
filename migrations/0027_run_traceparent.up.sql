-- The W3C traceparent a manual trigger brought, kept with its queued run so that the leader
-- that picks the run up, on whichever replica, starts the run's span in the caller's trace.
-- NULL for every other run; nullable without a default, so adding it rewrites no partition.
ALTER TABLE job_runs ADD COLUMN traceparent text;
