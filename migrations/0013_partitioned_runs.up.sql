-- job_runs and run_attempts partitioned by day, so that retention drops a day's partition
-- instead of deleting its rows one by one (docs/design.md, "Scaling").
--
-- A run's id carries its day: id = (UTC day number since 1970-01-01) << 37 | sequence, the
-- day of its slot (of its creation for a run without one). job_runs is partitioned by kept
-- (a list: job_runs_kept, job_runs_days) and job_runs_days by that id, one partition per
-- day; run_attempts by run_id the same way, so:
--   - GET /v1/runs/{id}, and every update of a run by id, touches one partition;
--   - the rows of one slot always fall into one partition, whose unique index on
--     (job, scheduled_at) therefore keeps the slot claimed once cluster-wide;
--   - ids stay below 2^53 until 2149, exact as JSON numbers in the console.
-- job_runs_kept holds what retention keeps past its day (each job's newest run and newest
-- slot): an UPDATE of kept moves a row there, atomically, before its day is detached.
-- Neither table has a DEFAULT partition, which would forbid DETACH ... CONCURRENTLY: a run
-- of a day without a partition fails to insert, so the leader adds them days ahead.
--
-- Upgrading a database that has runs: the existing tables become the partitions of ids
-- below 2^37 (job_runs_legacy, run_attempts_legacy) without moving a row; only the checks
-- below read them once (about 2 s per 10 M rows, under an exclusive lock: stop the replicas
-- first, as for every migration). Runs keep their ids, and the runs of the migration's day
-- still get ids of that kind, so that each slot has one partition; from the next UTC day
-- on, runs get day ids. The legacy partitions are dropped by retention like a day.

CREATE FUNCTION job_run_day(ts timestamptz) RETURNS int
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    RETURN floor(extract(epoch FROM ts) / 86400)::int;

-- The first id of a day's partition.
CREATE FUNCTION job_run_day_start(day int) RETURNS bigint
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    RETURN day::bigint << 37;

-- The unique indexes a partition of job_runs has on its own: a unique index of the
-- partitioned table must contain the partition key (id), which would make these useless.
-- Each holds cluster-wide all the same: a slot's rows share its day's partition; one active
-- run per job and one recovery per run are, across days, kept by the writers of those rows
-- taking the advisory lock 'scheduler:active_runs' (internal/store).
CREATE FUNCTION job_runs_partition_indexes(t text) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    -- A schedule slot is claimed once, whatever replica or epoch tries.
    EXECUTE format('CREATE UNIQUE INDEX %I ON %I (job, scheduled_at) WHERE scheduled_at IS NOT NULL',
                   t || '_slot_key', t);
    -- At most one queued-or-running run per job.
    EXECUTE format('CREATE UNIQUE INDEX %I ON %I (job) WHERE status IN (''queued'', ''running'')',
                   t || '_one_active_key', t);
    -- An abandoned run is recovered once.
    EXECUTE format('CREATE UNIQUE INDEX %I ON %I (recovers_run_id)', t || '_recovers_run_id_key', t);
END $$;

-- scheduler_add_run_day creates and attaches the partitions of job_runs and run_attempts for
-- the runs of a UTC day, unless they exist; true when it created them. The leader calls it
-- for the days ahead. ATTACH takes no lock that stops writers of other partitions.
CREATE FUNCTION scheduler_add_run_day(day date) RETURNS boolean LANGUAGE plpgsql AS $$
DECLARE
    lo bigint := job_run_day_start(day - date '1970-01-01');
    hi bigint := job_run_day_start(day - date '1970-01-01' + 1);
    runs text := 'job_runs_p' || to_char(day, 'YYYYMMDD');
    attempts text := 'run_attempts_p' || to_char(day, 'YYYYMMDD');
BEGIN
    PERFORM pg_advisory_xact_lock(hashtextextended('scheduler:run_partitions', 0));
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

CREATE OR REPLACE FUNCTION pg_temp.drop_checks(t regclass) RETURNS void LANGUAGE plpgsql AS $$
DECLARE c name;
BEGIN
    FOR c IN SELECT conname FROM pg_constraint WHERE conrelid = t AND contype = 'c' LOOP
        EXECUTE format('ALTER TABLE %s DROP CONSTRAINT %I', t, c);
    END LOOP;
END $$;

DO $migrate$
DECLARE
    legacy boolean := EXISTS (SELECT 1 FROM job_runs) OR EXISTS (SELECT 1 FROM run_attempts);
    -- Runs whose day starts before cutover get plain sequence ids (the legacy partition).
    cutover timestamptz := CASE WHEN legacy
                                THEN date_trunc('day', now() AT TIME ZONE 'UTC') AT TIME ZONE 'UTC' + interval '1 day'
                                ELSE '-infinity' END;
    -- Above every sequence number in use: an id's low 37 bits.
    next_id bigint := coalesce((SELECT max(id & 137438953471) FROM job_runs), 0) + 1;
    day date;
BEGIN
    DROP TRIGGER job_runs_queued_notify ON job_runs;
    IF legacy THEN
        ALTER TABLE job_runs RENAME TO job_runs_legacy;
        ALTER TABLE job_runs_legacy ALTER COLUMN id DROP IDENTITY;
        ALTER TABLE job_runs_legacy DROP CONSTRAINT job_runs_recovers_run_id_fkey;
        ALTER INDEX job_runs_pkey RENAME TO job_runs_legacy_pkey;
        ALTER INDEX job_runs_slot_key RENAME TO job_runs_legacy_slot_key;
        ALTER INDEX job_runs_one_active_key RENAME TO job_runs_legacy_one_active_key;
        ALTER INDEX job_runs_recovers_run_id_key RENAME TO job_runs_legacy_recovers_run_id_key;
        ALTER INDEX job_runs_job_id_idx RENAME TO job_runs_legacy_job_id_idx;
        ALTER INDEX job_runs_job_status_id_idx RENAME TO job_runs_legacy_job_status_id_idx;
        ALTER INDEX job_runs_job_trigger_id_idx RENAME TO job_runs_legacy_job_trigger_id_idx;
        ALTER TABLE run_attempts RENAME TO run_attempts_legacy;
        ALTER INDEX run_attempts_pkey RENAME TO run_attempts_legacy_pkey;
        DROP INDEX run_attempts_started_at_idx;
    ELSE
        DROP TABLE job_runs;
        DROP TABLE run_attempts;
    END IF;

    CREATE SEQUENCE job_runs_id_seq;
    PERFORM setval('job_runs_id_seq', next_id, false);
    EXECUTE format($f$
        CREATE FUNCTION job_run_id(ts timestamptz) RETURNS bigint LANGUAGE sql VOLATILE
        RETURN CASE WHEN ts < %L::timestamptz THEN nextval('job_runs_id_seq')
                    ELSE job_run_day_start(job_run_day(ts)) | (nextval('job_runs_id_seq') & 137438953471) END
    $f$, cutover);
    EXECUTE format($f$
        CREATE FUNCTION job_run_cutover() RETURNS timestamptz LANGUAGE sql IMMUTABLE RETURN %L::timestamptz
    $f$, cutover);

    CREATE TABLE job_runs (
        -- The day of the run (its slot's, else its creation's) and a sequence number.
        id            bigint NOT NULL DEFAULT job_run_id(now()),
        job           text NOT NULL,
        trigger       text NOT NULL CONSTRAINT job_runs_trigger_check
                          CHECK (trigger IN ('schedule', 'manual', 'catch-up', 'recovery')),
        status        text NOT NULL CONSTRAINT job_runs_status_check
                          CHECK (status IN ('queued', 'running', 'succeeded', 'failed', 'skipped',
                                            'timed_out', 'abandoned', 'cancelled', 'missed')),
        -- The slot's nominal time from the schedule (whole seconds); NULL for manual and recovery runs.
        scheduled_at  timestamptz,
        created_at    timestamptz NOT NULL DEFAULT now(),
        started_at    timestamptz,
        finished_at   timestamptz,
        instance_id   text,
        epoch         bigint,
        stats         jsonb NOT NULL DEFAULT '{}',
        error         text,
        -- Why a run was skipped (overlap, min-gap, paused) or why it was triggered (manual reason).
        reason        text,
        params        jsonb NOT NULL DEFAULT '{}',
        -- A recovery run names the abandoned run it re-runs, which is re-run only once.
        recovers_run_id bigint,
        cancel_requested boolean NOT NULL DEFAULT false,
        definition_version bigint,
        -- Kept past its day's partition by retention (job_runs_kept).
        kept          boolean NOT NULL DEFAULT false,
        CONSTRAINT job_runs_check CHECK (scheduled_at IS NULL OR trigger IN ('schedule', 'catch-up')),
        CONSTRAINT job_runs_check1 CHECK (scheduled_at IS NOT NULL OR trigger IN ('manual', 'recovery')),
        -- A slot's row is in its day's partition: what makes the per-partition slot index unique
        -- cluster-wide. Legacy ids carry no day.
        CONSTRAINT job_runs_slot_day_check CHECK (scheduled_at IS NULL OR id < 137438953472
                                                  OR id >> 37 = job_run_day(scheduled_at)),
        PRIMARY KEY (id, kept)
    ) PARTITION BY LIST (kept);
    CREATE TABLE job_runs_kept PARTITION OF job_runs FOR VALUES IN (true);
    PERFORM job_runs_partition_indexes('job_runs_kept');
    CREATE TABLE job_runs_days PARTITION OF job_runs FOR VALUES IN (false) PARTITION BY RANGE (id);
    -- History pages, newest first, per job (keyset on id).
    CREATE INDEX job_runs_job_id_idx ON job_runs (job, id DESC);
    CREATE INDEX job_runs_job_status_id_idx ON job_runs (job, status, id DESC);
    CREATE INDEX job_runs_job_trigger_id_idx ON job_runs (job, trigger, id DESC);

    CREATE TABLE run_attempts (
        run_id      bigint NOT NULL,
        attempt     int NOT NULL CONSTRAINT run_attempts_attempt_check CHECK (attempt > 0),
        started_at  timestamptz NOT NULL,
        duration_ms bigint NOT NULL,
        status_code int,
        body        text,
        error       text,
        PRIMARY KEY (run_id, attempt)
    ) PARTITION BY RANGE (run_id);

    IF legacy THEN
        -- A partition has its table's CHECK constraints under their names, whatever names
        -- the old table's got; they are added again in one statement (one scan), with the
        -- bound of the ids, which lets ATTACH skip its own scan.
        -- Rows with day ids (written by this version, kept through a down migration) go
        -- back to their days' partitions at the end.
        CREATE TEMP TABLE day_runs ON COMMIT DROP AS SELECT * FROM job_runs_legacy WHERE id >= 137438953472;
        DELETE FROM job_runs_legacy WHERE id >= 137438953472;
        CREATE TEMP TABLE day_attempts ON COMMIT DROP AS SELECT * FROM run_attempts_legacy WHERE run_id >= 137438953472;
        DELETE FROM run_attempts_legacy WHERE run_id >= 137438953472;
        PERFORM pg_temp.drop_checks('job_runs_legacy');
        -- Its primary key becomes (id, kept), built by ATTACH.
        ALTER TABLE job_runs_legacy ADD COLUMN kept boolean NOT NULL DEFAULT false,
                                    DROP CONSTRAINT job_runs_legacy_pkey;
        ALTER TABLE job_runs_legacy
            ADD CONSTRAINT job_runs_legacy_id_check CHECK (NOT kept AND id < 137438953472),
            ADD CONSTRAINT job_runs_trigger_check CHECK (trigger IN ('schedule', 'manual', 'catch-up', 'recovery')),
            ADD CONSTRAINT job_runs_status_check CHECK (status IN ('queued', 'running', 'succeeded', 'failed', 'skipped',
                                                                   'timed_out', 'abandoned', 'cancelled', 'missed')),
            ADD CONSTRAINT job_runs_check CHECK (scheduled_at IS NULL OR trigger IN ('schedule', 'catch-up')),
            ADD CONSTRAINT job_runs_check1 CHECK (scheduled_at IS NOT NULL OR trigger IN ('manual', 'recovery')),
            ADD CONSTRAINT job_runs_slot_day_check CHECK (scheduled_at IS NULL OR id < 137438953472
                                                          OR id >> 37 = job_run_day(scheduled_at));
        ALTER TABLE job_runs_days ATTACH PARTITION job_runs_legacy FOR VALUES FROM (MINVALUE) TO (137438953472);
        PERFORM pg_temp.drop_checks('run_attempts_legacy');
        ALTER TABLE run_attempts_legacy
            ADD CONSTRAINT run_attempts_legacy_id_check CHECK (run_id < 137438953472),
            ADD CONSTRAINT run_attempts_attempt_check CHECK (attempt > 0);
        ALTER TABLE run_attempts ATTACH PARTITION run_attempts_legacy FOR VALUES FROM (MINVALUE) TO (137438953472);
    END IF;

    -- The leader wakes up at once for a new manual run; polling is only the fallback.
    CREATE TRIGGER job_runs_queued_notify
        AFTER INSERT OR UPDATE OF status, cancel_requested ON job_runs
        FOR EACH ROW WHEN (NEW.status = 'queued' OR NEW.cancel_requested)
        EXECUTE FUNCTION job_runs_notify_queued();

    -- Yesterday's (a slot of 23:59 claimed after midnight), today's and tomorrow's
    -- partitions, the days of legacy ids excepted; the leader adds the next ones.
    PERFORM scheduler_add_run_day(d::date)
    FROM generate_series(date_trunc('day', now() AT TIME ZONE 'UTC') - interval '1 day',
                         date_trunc('day', now() AT TIME ZONE 'UTC') + interval '1 day', interval '1 day') AS d
    WHERE d >= cutover AT TIME ZONE 'UTC';
    IF legacy THEN
        PERFORM scheduler_add_run_day((cutover AT TIME ZONE 'UTC')::date + 1);
        FOR day IN SELECT DISTINCT date '1970-01-01' + (id >> 37)::int FROM day_runs
                   UNION SELECT DISTINCT date '1970-01-01' + (run_id >> 37)::int FROM day_attempts LOOP
            PERFORM scheduler_add_run_day(day);
        END LOOP;
        INSERT INTO job_runs SELECT * FROM day_runs;
        INSERT INTO run_attempts SELECT * FROM day_attempts;
    END IF;
END
$migrate$;
DROP FUNCTION pg_temp.drop_checks(regclass);
