DELETE FROM operator_actions WHERE action = 'oidc-rotate';
DO $$
DECLARE
    def text;
BEGIN
    SELECT pg_get_constraintdef(oid) INTO def FROM pg_constraint
    WHERE conrelid = 'operator_actions'::regclass AND conname = 'operator_actions_action_check';
    ALTER TABLE operator_actions DROP CONSTRAINT operator_actions_action_check;
    EXECUTE format('ALTER TABLE operator_actions ADD CONSTRAINT operator_actions_action_check CHECK %s',
                   replace(substring(def FROM '^CHECK (.*)$'), '(action = ''oidc-rotate''::text) OR ', ''));
END $$;
DROP TABLE scheduler_oidc_keys;
DELETE FROM scheduler_locks WHERE name = 'scheduler:oidc_keys';
