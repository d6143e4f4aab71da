-- Completion by callback (issue 33): an HTTP job whose definition says
-- "completion": "callback" stays running after its target accepted the call, until the
-- target posts the outcome to POST /v1/runs/{id}/complete with the run's token.
--
-- callback_token_hash is the SHA-256 of the run's token (256 random bits, so a slow hash adds
-- nothing): the value itself is only ever in the outgoing call's headers. It is set before
-- the call, so a completion that arrives before the acceptance is recorded is still
-- authenticated. callback_accepted_at marks a run whose target answered 2xx: the rescuer
-- leaves such a run alone (no goroutine owns it, by design), and the leader's watcher ends it
-- at callback_deadline (the job's timeout) or when no heartbeat came within
-- callback_heartbeat_timeout of callback_heartbeat_at. The completion's output (its first
-- 4 KiB, as an attempt's body) goes into stats: a text column here made the planner's
-- estimate of a job_runs row wide enough to read the active runs by a sequential scan
-- instead of the one-active index (TestClaimReadsActiveRunsWithoutBitmapScan).
ALTER TABLE job_runs
    ADD COLUMN callback_token_hash bytea,
    ADD COLUMN callback_accepted_at timestamptz,
    ADD COLUMN callback_heartbeat_at timestamptz,
    ADD COLUMN callback_heartbeat_timeout interval,
    ADD COLUMN callback_deadline timestamptz;


-- The watcher's scan: only accepted runs still running, a handful at any time.
CREATE INDEX job_runs_callbacks_idx ON job_runs (id)
    WHERE status = 'running' AND callback_accepted_at IS NOT NULL;
