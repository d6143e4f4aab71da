DELETE FROM operator_actions WHERE action = 'drain';
DO $$
DECLARE
    def text;
BEGIN
    SELECT pg_get_constraintdef(oid) INTO def FROM pg_constraint
    WHERE conrelid = 'operator_actions'::regclass AND conname = 'operator_actions_action_check';
    ALTER TABLE operator_actions DROP CONSTRAINT operator_actions_action_check;
    EXECUTE format('ALTER TABLE operator_actions ADD CONSTRAINT operator_actions_action_check CHECK %s',
                   replace(substring(def FROM '^CHECK (.*)$'), '(action = ''drain''::text) OR ', ''));
END $$;
DELETE FROM scheduler_control WHERE kind = 'drain';
DROP INDEX IF EXISTS scheduler_control_drain_idx;
ALTER TABLE scheduler_control DROP CONSTRAINT IF EXISTS scheduler_control_drain_names_instance;
ALTER TABLE scheduler_control DROP COLUMN IF EXISTS instance_id;
ALTER TABLE scheduler_control DROP CONSTRAINT scheduler_control_kind_check;
ALTER TABLE scheduler_control ADD CONSTRAINT scheduler_control_kind_check CHECK (kind IN ('step-down'));
