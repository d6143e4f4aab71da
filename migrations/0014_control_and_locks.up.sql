-- Issue 28, "A job cannot stop the scheduler" (docs/design.md guarantee 12). Runtime SQL jobs
-- may reach this database under other logins, and any login can NOTIFY any channel and take
-- any advisory lock. So what the scheduler obeys and how it excludes itself must live where
-- only its own login can write: rows of its own tables.

-- Control messages to the leader. A NOTIFY on scheduler_leader_step_down only wakes the
-- leader; it acts on a row of this table naming its epoch, written in the same transaction
-- as the request's audit row (operator_actions), and stamps the row handled. A notification
-- with no row behind it is ignored and counted (scheduler_control_notifications_ignored_total).
CREATE TABLE scheduler_control (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    kind        text NOT NULL CHECK (kind IN ('step-down')),
    -- The term the message is for: a request can never depose a leader elected after it.
    epoch       bigint NOT NULL,
    -- Who asked, as in the audit row: the token kind, the optional reason, the request id.
    token_kind  text NOT NULL,
    reason      text,
    request_id  text NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    -- When and by which instance the message was acted on; NULL while pending.
    handled_at  timestamptz,
    handled_by  text
);
-- The leader reads its term's pending messages at every wake-up and heartbeat.
CREATE INDEX scheduler_control_pending_idx ON scheduler_control (epoch, kind) WHERE handled_at IS NULL;

-- The scheduler's own mutual exclusion: one row per lock, locked FOR UPDATE by the
-- transactions that must not overlap (store.KnownLocks says what each is for). A login
-- without privileges on this table cannot lock its rows, where any login could take a
-- fixed-key advisory lock and stall every claim.
CREATE TABLE scheduler_locks (
    name text PRIMARY KEY
);
INSERT INTO scheduler_locks (name) VALUES
    ('scheduler:active_runs'),
    ('scheduler:job_definitions'),
    ('scheduler:run_partitions');

-- Never readable or writable by other logins: the defaults grant PUBLIC nothing on a table,
-- and this says so where a reviewer looks.
REVOKE ALL ON scheduler_control, scheduler_locks FROM PUBLIC;

-- scheduler_add_run_day as in 0013, serialised by its scheduler_locks row instead of the
-- advisory lock scheduler:run_partitions.
CREATE OR REPLACE FUNCTION scheduler_add_run_day(day date) RETURNS boolean LANGUAGE plpgsql AS $$
DECLARE
    lo bigint := job_run_day_start(day - date '1970-01-01');
    hi bigint := job_run_day_start(day - date '1970-01-01' + 1);
    runs text := 'job_runs_p' || to_char(day, 'YYYYMMDD');
    attempts text := 'run_attempts_p' || to_char(day, 'YYYYMMDD');
BEGIN
    PERFORM 1 FROM scheduler_locks WHERE name = 'scheduler:run_partitions' FOR UPDATE;
    IF to_regclass(runs) IS NOT NULL THEN
        RETURN false;
    END IF;
    EXECUTE format('CREATE TABLE %I (LIKE job_runs INCLUDING DEFAULTS INCLUDING CONSTRAINTS)', runs);
    PERFORM job_runs_partition_indexes(runs);
    EXECUTE format('CREATE TABLE %I (LIKE run_attempts INCLUDING DEFAULTS INCLUDING CONSTRAINTS)', attempts);
    EXECUTE format('ALTER TABLE job_runs_days ATTACH PARTITION %I FOR VALUES FROM (%s) TO (%s)', runs, lo, hi);
    EXECUTE format('ALTER TABLE run_attempts ATTACH PARTITION %I FOR VALUES FROM (%s) TO (%s)', attempts, lo, hi);
    RETURN true;
END $$;
