DELETE FROM operator_actions WHERE action IN ('create', 'update', 'delete', 'auto-pause');
ALTER TABLE operator_actions DROP CONSTRAINT operator_actions_action_check;
ALTER TABLE operator_actions ADD CONSTRAINT operator_actions_action_check
    CHECK (action IN ('trigger', 'cancel', 'pause', 'resume', 'step-down', 'refused'));
ALTER TABLE operator_actions DROP COLUMN detail;
DROP TABLE run_attempts;
ALTER TABLE job_runs DROP COLUMN definition_version;
DROP TABLE job_definitions;
DROP FUNCTION job_definitions_notify();
