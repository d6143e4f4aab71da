DROP TRIGGER IF EXISTS job_runs_active_bound_update ON job_runs;
DROP TRIGGER IF EXISTS job_runs_active_bound ON job_runs;
DROP FUNCTION IF EXISTS job_runs_check_reactivated();
DROP FUNCTION IF EXISTS job_runs_check_bound();

-- The older schema allows one active run per job: the others (of "allow" jobs) end
-- cancelled, the oldest one stays.
UPDATE job_runs r SET status = 'cancelled', finished_at = now(),
                      error = 'cancelled by the schema downgrade: one active run per job'
WHERE status IN ('queued', 'running')
  AND EXISTS (SELECT 1 FROM job_runs o WHERE o.job = r.job AND o.status IN ('queued', 'running') AND o.id < r.id);

CREATE OR REPLACE FUNCTION job_runs_partition_indexes(t text) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    EXECUTE format('CREATE UNIQUE INDEX %I ON %I (job, scheduled_at, rerun) WHERE scheduled_at IS NOT NULL',
                   t || '_slot_key', t);
    EXECUTE format('CREATE UNIQUE INDEX %I ON %I (job) WHERE status IN (''queued'', ''running'')',
                   t || '_one_active_key', t);
    EXECUTE format('CREATE UNIQUE INDEX %I ON %I (recovers_run_id)', t || '_recovers_run_id_key', t);
END $$;

DO $$
DECLARE
    t text;
BEGIN
    FOR t IN SELECT c.relname FROM pg_class c JOIN pg_index i ON i.indrelid = c.oid
             JOIN pg_class ix ON ix.oid = i.indexrelid
             WHERE ix.relname = c.relname || '_active_idx' AND c.relname LIKE 'job_runs%'
    LOOP
        EXECUTE format('CREATE UNIQUE INDEX %I ON %I (job) WHERE status IN (''queued'', ''running'')', t || '_one_active_key', t);
        EXECUTE format('DROP INDEX %I', t || '_active_idx');
    END LOOP;
END $$;

-- The older code knows overlap skip and queue-one only.
UPDATE job_definitions
SET definition = jsonb_set(definition - 'max_concurrent', '{overlap}', '"skip"'), version = version + 1, updated_at = now()
WHERE definition->>'overlap' IN ('replace', 'allow');

DROP FUNCTION IF EXISTS job_run_bound(text);
ALTER TABLE job_definitions DROP COLUMN IF EXISTS max_concurrent;
