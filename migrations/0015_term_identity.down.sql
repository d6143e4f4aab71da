DELETE FROM operator_actions WHERE action = 'failover';
DO $$
DECLARE
    def text;
BEGIN
    SELECT pg_get_constraintdef(oid) INTO def FROM pg_constraint
    WHERE conrelid = 'operator_actions'::regclass AND conname = 'operator_actions_action_check';
    ALTER TABLE operator_actions DROP CONSTRAINT operator_actions_action_check;
    EXECUTE format('ALTER TABLE operator_actions ADD CONSTRAINT operator_actions_action_check %s',
                   replace(def, '((action = ''failover''::text) OR ', '('));
END $$;

CREATE OR REPLACE FUNCTION job_run_id(ts timestamptz) RETURNS bigint LANGUAGE sql VOLATILE
RETURN CASE WHEN ts < job_run_cutover() THEN nextval('job_runs_id_seq')
            ELSE job_run_day_start(job_run_day(ts)) | (nextval('job_runs_id_seq') & 137438953471) END;

ALTER TABLE scheduler_leader DROP COLUMN term_id, DROP COLUMN timeline;
DROP FUNCTION scheduler_timeline();
