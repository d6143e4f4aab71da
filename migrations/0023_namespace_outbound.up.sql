-- Each namespace's outbound surface, set by an admin (docs/design.md, "Teams"): the SQL
-- targets its jobs may name, the private addresses and hosts they may call (inside the
-- operator's SCHEDULER_HTTP_ALLOW), and the operator's environment secrets they may name.
-- NULL is "never set", which only namespace default may be: it then keeps what it had
-- before namespaces had a surface (every target no other namespace has bound, the
-- operator's whole allow list, every environment secret but a target's password), so a
-- single-team deployment works unchanged. Every other namespace starts with nothing.
ALTER TABLE scheduler_namespaces
    ADD COLUMN sql_targets text[] DEFAULT '{}',
    ADD COLUMN http_allow  text[] DEFAULT '{}',
    ADD COLUMN env_secrets text[] DEFAULT '{}';
UPDATE scheduler_namespaces SET sql_targets = NULL, http_allow = NULL, env_secrets = NULL
WHERE name = 'default';
ALTER TABLE scheduler_namespaces ADD CONSTRAINT scheduler_namespaces_outbound_set
    CHECK (name = 'default' OR (sql_targets IS NOT NULL AND http_allow IS NOT NULL AND env_secrets IS NOT NULL));

-- A target login serves one namespace: the login (user@host:port/database) of every
-- target a namespace binds is a row here, and the primary key refuses a second namespace.
-- Two admins binding the same login at once meet on that key: the second waits for the
-- first's commit and then finds the row, so both cannot win.
CREATE TABLE scheduler_sql_logins (
    login      text PRIMARY KEY,
    namespace  text NOT NULL REFERENCES scheduler_namespaces (name) ON DELETE CASCADE,
    bound_at   timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX scheduler_sql_logins_namespace_idx ON scheduler_sql_logins (namespace);
