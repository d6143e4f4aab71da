-- Teams (docs/design.md, "Teams"): namespaces that own runtime jobs and secrets, tokens
-- scoped to them, and an audit log that names who acted and where.

-- A namespace owns runtime jobs and secrets. Its quotas are NULL when unbounded.
CREATE TABLE scheduler_namespaces (
    name                 text PRIMARY KEY CHECK (name ~ '^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$'),
    max_jobs             integer CHECK (max_jobs > 0),
    max_concurrent_calls integer CHECK (max_concurrent_calls > 0),
    min_interval_ms      bigint  CHECK (min_interval_ms > 0),
    created_at           timestamptz NOT NULL DEFAULT now(),
    updated_at           timestamptz NOT NULL DEFAULT now()
);
INSERT INTO scheduler_namespaces (name) VALUES ('default');

-- A runtime job's key is its name in namespace default and "<namespace>/<name>" elsewhere:
-- the key is what job_runs, job_settings, the engine and the metrics name the job by, so the
-- jobs that existed before namespaces keep their history, and two namespaces may each have a
-- "daily-report". The namespace is derived from the key, so the two cannot disagree.
ALTER TABLE job_definitions DROP CONSTRAINT job_definitions_name_check;
ALTER TABLE job_definitions ADD CONSTRAINT job_definitions_name_check
    CHECK (name ~ '^([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?/)?[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$'
           AND name NOT LIKE 'default/%');
ALTER TABLE job_definitions ADD COLUMN namespace text NOT NULL
    GENERATED ALWAYS AS (CASE WHEN strpos(name, '/') > 0 THEN split_part(name, '/', 1) ELSE 'default' END) STORED
    REFERENCES scheduler_namespaces (name);
CREATE INDEX job_definitions_namespace_idx ON job_definitions (namespace, name);

-- API tokens: only a SHA-256 of the value is kept (the value is 256 random bits, so a
-- slow hash adds nothing). An admin token has no namespace; a viewer or editor has one.
CREATE TABLE scheduler_tokens (
    id         text PRIMARY KEY CHECK (id ~ '^tok_[0-9a-f]{16}$'),
    name       text NOT NULL CHECK (length(name) BETWEEN 1 AND 100),
    role       text NOT NULL CHECK (role IN ('viewer', 'editor', 'admin')),
    namespace  text REFERENCES scheduler_namespaces (name),
    hash       bytea NOT NULL UNIQUE CHECK (length(hash) = 32),
    created_at timestamptz NOT NULL DEFAULT now(),
    created_by text NOT NULL,
    expires_at timestamptz,
    revoked_at timestamptz,
    CHECK ((role = 'admin') = (namespace IS NULL))
);

-- Secrets stored through the API, per namespace, sealed with AES-256-GCM under
-- SCHEDULER_SECRET_KEY; key_id names the key a value was sealed with, so a key rotation
-- can find what it has not yet re-sealed. The value is never stored in clear.
CREATE TABLE scheduler_secrets (
    namespace     text NOT NULL REFERENCES scheduler_namespaces (name),
    name          text NOT NULL CHECK (name ~ '^[A-Z][A-Z0-9_]{0,62}$'),
    version       bigint NOT NULL DEFAULT 1 CHECK (version > 0),
    key_id        text NOT NULL,
    sealed        bytea NOT NULL,
    allowed_hosts text[] NOT NULL,
    created_at    timestamptz NOT NULL DEFAULT now(),
    updated_at    timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (namespace, name)
);

-- Every audit row names the token that acted (id and name) and the namespace it acted in.
ALTER TABLE operator_actions ADD COLUMN token_id text, ADD COLUMN token_name text, ADD COLUMN namespace text;
CREATE INDEX operator_actions_namespace_idx ON operator_actions (namespace, id);
DO $$
DECLARE
    def text;
BEGIN
    SELECT pg_get_constraintdef(oid) INTO def FROM pg_constraint
    WHERE conrelid = 'operator_actions'::regclass AND conname = 'operator_actions_action_check';
    ALTER TABLE operator_actions DROP CONSTRAINT operator_actions_action_check;
    EXECUTE format('ALTER TABLE operator_actions ADD CONSTRAINT operator_actions_action_check CHECK (action IN (%L, %L, %L, %L, %L) OR %s)',
                   'namespace', 'token-create', 'token-revoke', 'secret-put', 'secret-delete',
                   substring(def FROM '^CHECK (.*)$'));
END $$;
