-- Runtime jobs: jobs users define through the API, `scheduler apply` and the console, beside
-- the compiled ones. A definition is the checked, normalised JSON (internal/runtimejob),
-- naming its secrets, never holding their values. version counts every change: a run
-- records the version it ran, and PUT's If-Match compares it, so a lost update is refused.
CREATE TABLE job_definitions (
    name       text PRIMARY KEY CHECK (name ~ '^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$'),
    version    bigint NOT NULL DEFAULT 1 CHECK (version > 0),
    kind       text NOT NULL CHECK (kind IN ('http', 'sql')),
    definition jsonb NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now()
);

-- The leader reloads its definitions on every change, at commit, rather than at its next
-- poll. The payload is the job's name.
CREATE FUNCTION job_definitions_notify() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('scheduler_definitions', coalesce(NEW.name, OLD.name));
    RETURN NULL;
END $$;
CREATE TRIGGER job_definitions_notify AFTER INSERT OR UPDATE OR DELETE ON job_definitions
    FOR EACH ROW EXECUTE FUNCTION job_definitions_notify();

-- The version of its job's definition a run ran with (NULL for built-in jobs).
ALTER TABLE job_runs ADD COLUMN definition_version bigint;

-- Each attempt of a runtime HTTP job's call: what the target answered, in the first 4 KiB of
-- its body, or why there was no answer. Not a foreign key: data-retention purges both by age.
CREATE TABLE run_attempts (
    run_id      bigint NOT NULL,
    attempt     int NOT NULL CHECK (attempt > 0),
    started_at  timestamptz NOT NULL,
    duration_ms bigint NOT NULL,
    status_code int,
    body        text,
    error       text,
    PRIMARY KEY (run_id, attempt)
);
CREATE INDEX run_attempts_started_at_idx ON run_attempts (started_at);

-- Definition changes and automatic pauses join the audit log, with the definition before and
-- after (secret names only) in detail.
ALTER TABLE operator_actions ADD COLUMN detail jsonb;
ALTER TABLE operator_actions DROP CONSTRAINT operator_actions_action_check;
ALTER TABLE operator_actions ADD CONSTRAINT operator_actions_action_check
    CHECK (action IN ('trigger', 'cancel', 'pause', 'resume', 'step-down', 'refused',
                      'create', 'update', 'delete', 'auto-pause'));
