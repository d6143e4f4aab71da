-- Overlap "allow" with "max_concurrent" (issue 33): a job may have up to its bound of queued
-- or running runs at once, instead of one. The per-partition unique index on a job's active
-- run becomes a plain index, and the bound is a checked count: a trigger on job_runs counts
-- the job's active runs after every insert that adds one, under the lock row
-- 'scheduler:active_runs' that every writer of an active run takes (internal/store/locks.go),
-- so two writers on any replicas, of any epoch, or a login writing job_runs directly, cannot
-- pass the bound together: the second one's count, taken after the first one committed,
-- sees its run.
--
-- A job's bound: its runtime definition's max_concurrent (only with "overlap": "allow"),
-- else 1 (built-in jobs, and runtime jobs with skip, queue-one or replace).
ALTER TABLE job_definitions
    ADD COLUMN max_concurrent integer NOT NULL
        GENERATED ALWAYS AS (CASE WHEN definition->>'overlap' = 'allow'
                                  THEN coalesce((definition->>'max_concurrent')::integer, 1) ELSE 1 END) STORED
        CHECK (max_concurrent >= 1);

CREATE FUNCTION job_run_bound(job text) RETURNS integer
    LANGUAGE sql STABLE PARALLEL SAFE
    RETURN coalesce((SELECT d.max_concurrent FROM job_definitions d WHERE d.name = job), 1);

-- The check of an INSERT statement, once for all its rows: the active runs it wrote, per job,
-- against the job's bound. Few new runs: a count per job (an index probe of each day); many
-- (a claim of thousands of slots): every active run read once, into a hashed join.
CREATE FUNCTION job_runs_check_bound() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    over text;
BEGIN
    IF NOT EXISTS (SELECT 1 FROM new_runs WHERE status IN ('queued', 'running')) THEN
        RETURN NULL;
    END IF;
    -- A later statement than the lock: its snapshot sees every earlier writer's commit.
    PERFORM FROM scheduler_locks WHERE name = 'scheduler:active_runs' FOR UPDATE;
    IF (SELECT count(*) FROM new_runs) <= 64 THEN
        SELECT n.job INTO over
        FROM (SELECT DISTINCT job FROM new_runs WHERE status IN ('queued', 'running')) n
        WHERE (SELECT count(*) FROM job_runs r WHERE r.job = n.job AND r.status IN ('queued', 'running'))
              > job_run_bound(n.job)
        LIMIT 1;
    ELSE
        WITH active AS MATERIALIZED (
            SELECT job, count(*) AS n FROM job_runs WHERE status IN ('queued', 'running') GROUP BY job
        )
        SELECT a.job INTO over
        FROM active a
        JOIN (SELECT DISTINCT job FROM new_runs WHERE status IN ('queued', 'running')) n ON n.job = a.job
        LEFT JOIN job_definitions d ON d.name = a.job
        WHERE a.n > coalesce(d.max_concurrent, 1)
        LIMIT 1;
    END IF;
    IF over IS NOT NULL THEN
        RAISE EXCEPTION 'job % would have more queued or running runs than its bound (%)', over, job_run_bound(over)
            USING ERRCODE = 'check_violation', CONSTRAINT = 'job_runs_active_bound';
    END IF;
    RETURN NULL;
END $$;

CREATE TRIGGER job_runs_active_bound
    AFTER INSERT ON job_runs REFERENCING NEW TABLE AS new_runs
    FOR EACH STATEMENT EXECUTE FUNCTION job_runs_check_bound();

-- An UPDATE that makes a finished run active again: none of the scheduler's, which only move
-- queued to running, but a direct write must not pass the bound either.
CREATE FUNCTION job_runs_check_reactivated() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM FROM scheduler_locks WHERE name = 'scheduler:active_runs' FOR UPDATE;
    IF (SELECT count(*) FROM job_runs r WHERE r.job = NEW.job AND r.status IN ('queued', 'running'))
       >= job_run_bound(NEW.job) THEN
        RAISE EXCEPTION 'job % would have more queued or running runs than its bound (%)', NEW.job, job_run_bound(NEW.job)
            USING ERRCODE = 'check_violation', CONSTRAINT = 'job_runs_active_bound';
    END IF;
    RETURN NEW;
END $$;

CREATE TRIGGER job_runs_active_bound_update
    BEFORE UPDATE OF status ON job_runs
    FOR EACH ROW WHEN (OLD.status NOT IN ('queued', 'running') AND NEW.status IN ('queued', 'running'))
    EXECUTE FUNCTION job_runs_check_reactivated();

-- New day partitions get the plain index.
CREATE OR REPLACE FUNCTION job_runs_partition_indexes(t text) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    -- A schedule slot is claimed once, whatever replica or epoch tries; its re-runs count on.
    EXECUTE format('CREATE UNIQUE INDEX %I ON %I (job, scheduled_at, rerun) WHERE scheduled_at IS NOT NULL',
                   t || '_slot_key', t);
    -- A job's queued or running runs, counted against its bound (job_runs_active_bound).
    EXECUTE format('CREATE INDEX %I ON %I (job) WHERE status IN (''queued'', ''running'')',
                   t || '_active_idx', t);
    -- An abandoned run is recovered once.
    EXECUTE format('CREATE UNIQUE INDEX %I ON %I (recovers_run_id)', t || '_recovers_run_id_key', t);
END $$;

-- Every existing partition's unique index becomes the plain one.
DO $$
DECLARE
    t text;
BEGIN
    FOR t IN SELECT c.relname FROM pg_class c JOIN pg_index i ON i.indrelid = c.oid
             JOIN pg_class ix ON ix.oid = i.indexrelid
             WHERE ix.relname = c.relname || '_one_active_key' AND c.relname LIKE 'job_runs%'
    LOOP
        EXECUTE format('CREATE INDEX %I ON %I (job) WHERE status IN (''queued'', ''running'')', t || '_active_idx', t);
        EXECUTE format('DROP INDEX %I', t || '_one_active_key');
    END LOOP;
END $$;
