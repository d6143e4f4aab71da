DROP TABLE IF EXISTS scheduler_sql_logins;
ALTER TABLE scheduler_namespaces DROP CONSTRAINT IF EXISTS scheduler_namespaces_outbound_set;
ALTER TABLE scheduler_namespaces DROP COLUMN IF EXISTS sql_targets,
    DROP COLUMN IF EXISTS http_allow, DROP COLUMN IF EXISTS env_secrets;
