-- Back to one job_runs and one run_attempts table, with every row kept (ids included).
ALTER TABLE job_runs RENAME TO job_runs_partitioned;
ALTER INDEX job_runs_pkey RENAME TO job_runs_partitioned_pkey;
ALTER INDEX job_runs_job_id_idx RENAME TO job_runs_partitioned_job_id_idx;
ALTER INDEX job_runs_job_status_id_idx RENAME TO job_runs_partitioned_job_status_id_idx;
ALTER INDEX job_runs_job_trigger_id_idx RENAME TO job_runs_partitioned_job_trigger_id_idx;
ALTER TABLE run_attempts RENAME TO run_attempts_partitioned;
ALTER INDEX run_attempts_pkey RENAME TO run_attempts_partitioned_pkey;

CREATE TABLE job_runs (
    id            bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    job           text NOT NULL,
    trigger       text NOT NULL CONSTRAINT job_runs_trigger_check
                      CHECK (trigger IN ('schedule', 'manual', 'catch-up', 'recovery')),
    status        text NOT NULL CONSTRAINT job_runs_status_check
                      CHECK (status IN ('queued', 'running', 'succeeded', 'failed', 'skipped',
                                        'timed_out', 'abandoned', 'cancelled', 'missed')),
    scheduled_at  timestamptz,
    created_at    timestamptz NOT NULL DEFAULT now(),
    started_at    timestamptz,
    finished_at   timestamptz,
    instance_id   text,
    epoch         bigint,
    stats         jsonb NOT NULL DEFAULT '{}',
    error         text,
    reason        text,
    params        jsonb NOT NULL DEFAULT '{}',
    recovers_run_id bigint UNIQUE,
    cancel_requested boolean NOT NULL DEFAULT false,
    definition_version bigint,
    CONSTRAINT job_runs_check CHECK (scheduled_at IS NULL OR trigger IN ('schedule', 'catch-up')),
    CONSTRAINT job_runs_check1 CHECK (scheduled_at IS NOT NULL OR trigger IN ('manual', 'recovery'))
);
INSERT INTO job_runs OVERRIDING SYSTEM VALUE
SELECT id, job, trigger, status, scheduled_at, created_at, started_at, finished_at, instance_id, epoch,
       stats, error, reason, params, recovers_run_id, cancel_requested, definition_version
FROM job_runs_partitioned;
SELECT setval(pg_get_serial_sequence('job_runs', 'id'), coalesce(max(id), 0) + 1, false) FROM job_runs;
UPDATE job_runs SET recovers_run_id = NULL
WHERE recovers_run_id IS NOT NULL AND NOT EXISTS (SELECT 1 FROM job_runs o WHERE o.id = job_runs.recovers_run_id);
ALTER TABLE job_runs ADD FOREIGN KEY (recovers_run_id) REFERENCES job_runs (id) ON DELETE SET NULL;
CREATE UNIQUE INDEX job_runs_slot_key ON job_runs (job, scheduled_at) WHERE scheduled_at IS NOT NULL;
CREATE UNIQUE INDEX job_runs_one_active_key ON job_runs (job) WHERE status IN ('queued', 'running');
CREATE INDEX job_runs_job_id_idx ON job_runs (job, id DESC);
CREATE INDEX job_runs_job_status_id_idx ON job_runs (job, status, id DESC);
CREATE INDEX job_runs_job_trigger_id_idx ON job_runs (job, trigger, id DESC);
CREATE TRIGGER job_runs_queued_notify
    AFTER INSERT OR UPDATE OF status, cancel_requested ON job_runs
    FOR EACH ROW WHEN (NEW.status = 'queued' OR NEW.cancel_requested)
    EXECUTE FUNCTION job_runs_notify_queued();

CREATE TABLE run_attempts (
    run_id      bigint NOT NULL,
    attempt     int NOT NULL CONSTRAINT run_attempts_attempt_check CHECK (attempt > 0),
    started_at  timestamptz NOT NULL,
    duration_ms bigint NOT NULL,
    status_code int,
    body        text,
    error       text,
    PRIMARY KEY (run_id, attempt)
);
CREATE INDEX run_attempts_started_at_idx ON run_attempts (started_at);
INSERT INTO run_attempts SELECT * FROM run_attempts_partitioned;

-- The partitions, attached or left detached by an unfinished retention.
DO $$
DECLARE t text;
BEGIN
    FOR t IN SELECT relname FROM pg_class
             WHERE relkind IN ('r', 'p') AND relnamespace = current_schema()::regnamespace
               AND (relname ~ '^job_runs_(p[0-9]{8}|legacy|kept|days|partitioned)$'
                    OR relname ~ '^run_attempts_(p[0-9]{8}|legacy|partitioned)$')
    LOOP
        EXECUTE format('DROP TABLE IF EXISTS %I CASCADE', t);
    END LOOP;
END $$;
DROP FUNCTION scheduler_add_run_day(date);
DROP FUNCTION job_runs_partition_indexes(text);
DROP FUNCTION job_run_id(timestamptz);
DROP FUNCTION job_run_cutover();
DROP SEQUENCE job_runs_id_seq;
DROP FUNCTION job_run_day_start(int);
DROP FUNCTION job_run_day(timestamptz);
