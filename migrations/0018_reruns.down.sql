DELETE FROM operator_actions WHERE action IN ('rerun', 'backfill', 'backfill-cancel');
DO $$
DECLARE
    def text;
BEGIN
    SELECT pg_get_constraintdef(oid) INTO def FROM pg_constraint
    WHERE conrelid = 'operator_actions'::regclass AND conname = 'operator_actions_action_check';
    ALTER TABLE operator_actions DROP CONSTRAINT operator_actions_action_check;
    EXECUTE format('ALTER TABLE operator_actions ADD CONSTRAINT operator_actions_action_check %s',
                   replace(def, '((action = ANY (ARRAY[''rerun''::text, ''backfill''::text, ''backfill-cancel''::text])) OR ', '('));
END $$;
DROP TABLE scheduler_backfills;
DELETE FROM job_runs WHERE rerun > 0;
CREATE OR REPLACE FUNCTION job_runs_partition_indexes(t text) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    EXECUTE format('CREATE UNIQUE INDEX %I ON %I (job, scheduled_at) WHERE scheduled_at IS NOT NULL',
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
             WHERE ix.relname = c.relname || '_slot_key' AND c.relname LIKE 'job_runs%'
    LOOP
        EXECUTE format('DROP INDEX %I', t || '_slot_key');
        EXECUTE format('CREATE UNIQUE INDEX %I ON %I (job, scheduled_at) WHERE scheduled_at IS NOT NULL',
                       t || '_slot_key', t);
    END LOOP;
END $$;
ALTER TABLE job_runs DROP CONSTRAINT job_runs_rerun_check1;
ALTER TABLE job_runs DROP CONSTRAINT job_runs_check;
ALTER TABLE job_runs ADD CONSTRAINT job_runs_check CHECK (scheduled_at IS NULL OR trigger IN ('schedule', 'catch-up'));
ALTER TABLE job_runs DROP CONSTRAINT job_runs_check1;
ALTER TABLE job_runs ADD CONSTRAINT job_runs_check1 CHECK (scheduled_at IS NOT NULL OR trigger IN ('manual', 'recovery'));
ALTER TABLE job_runs DROP CONSTRAINT job_runs_trigger_check;
ALTER TABLE job_runs ADD CONSTRAINT job_runs_trigger_check CHECK (trigger IN ('schedule', 'manual', 'catch-up', 'recovery'));
ALTER TABLE job_runs DROP COLUMN rerun;
