DELETE FROM operator_actions WHERE action IN ('namespace', 'token-create', 'token-revoke', 'secret-put', 'secret-delete');
DO $$
DECLARE
    def text;
BEGIN
    SELECT pg_get_constraintdef(oid) INTO def FROM pg_constraint
    WHERE conrelid = 'operator_actions'::regclass AND conname = 'operator_actions_action_check';
    ALTER TABLE operator_actions DROP CONSTRAINT operator_actions_action_check;
    EXECUTE format('ALTER TABLE operator_actions ADD CONSTRAINT operator_actions_action_check %s',
                   replace(def, '((action = ANY (ARRAY[''namespace''::text, ''token-create''::text, ''token-revoke''::text, ''secret-put''::text, ''secret-delete''::text])) OR ', '('));
END $$;
DROP INDEX operator_actions_namespace_idx;
ALTER TABLE operator_actions DROP COLUMN token_id, DROP COLUMN token_name, DROP COLUMN namespace;
DROP TABLE scheduler_secrets;
DROP TABLE scheduler_tokens;
DELETE FROM job_definitions WHERE name LIKE '%/%';
ALTER TABLE job_definitions DROP COLUMN namespace;
ALTER TABLE job_definitions DROP CONSTRAINT job_definitions_name_check;
ALTER TABLE job_definitions ADD CONSTRAINT job_definitions_name_check
    CHECK (name ~ '^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$');
DROP TABLE scheduler_namespaces;
