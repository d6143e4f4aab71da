-- The scheduler's own tables: the leader row (epoch = fencing token), instance heartbeats,
-- per-job settings that every replica must see, and the record of every run.

CREATE TABLE scheduler_leader (
    id          int PRIMARY KEY DEFAULT 1 CHECK (id = 1),
    -- Bumped by every election. Jobs commit only while their epoch equals this value
    -- (they read it FOR SHARE, which also makes the next bump wait for them).
    epoch       bigint NOT NULL DEFAULT 0,
    instance_id text,
    since       timestamptz
);
INSERT INTO scheduler_leader (id) VALUES (1);

CREATE TABLE scheduler_instances (
    instance_id  text PRIMARY KEY,
    host         text NOT NULL,
    version      text NOT NULL,
    http_addr    text NOT NULL DEFAULT '',
    started_at   timestamptz NOT NULL,
    last_seen_at timestamptz NOT NULL,
    is_leader    boolean NOT NULL DEFAULT false
);

CREATE TABLE job_settings (
    job        text PRIMARY KEY,
    paused     boolean NOT NULL DEFAULT false,
    updated_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE job_runs (
    id            bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    job           text NOT NULL,
    trigger       text NOT NULL CHECK (trigger IN ('schedule', 'manual', 'catch-up', 'recovery')),
    status        text NOT NULL CHECK (status IN ('queued', 'running', 'succeeded', 'failed', 'skipped',
                                                  'timed_out', 'abandoned', 'cancelled', 'missed')),
    -- The slot's nominal time from the schedule (whole seconds); NULL for manual and recovery runs.
    scheduled_at  timestamptz,
    created_at    timestamptz NOT NULL DEFAULT now(),
    started_at    timestamptz,
    finished_at   timestamptz,
    instance_id   text,
    epoch         bigint,
    stats         jsonb NOT NULL DEFAULT '{}',
    error         text,
    -- Why a run was skipped (overlap, min-gap, paused) or why it was triggered (manual reason).
    reason        text,
    params        jsonb NOT NULL DEFAULT '{}',
    -- A recovery run names the abandoned run it re-runs; unique, so it is re-run only once.
    recovers_run_id bigint UNIQUE REFERENCES job_runs (id) ON DELETE SET NULL,
    cancel_requested boolean NOT NULL DEFAULT false,
    CHECK (scheduled_at IS NULL OR trigger IN ('schedule', 'catch-up')),
    CHECK (scheduled_at IS NOT NULL OR trigger IN ('manual', 'recovery'))
);

-- Guarantee 2: a schedule slot is claimed once, cluster-wide, whatever replica or epoch tries.
CREATE UNIQUE INDEX job_runs_slot_key ON job_runs (job, scheduled_at) WHERE scheduled_at IS NOT NULL;

-- Guarantee 4, enforced by the database itself: at most one queued-or-running run per job.
CREATE UNIQUE INDEX job_runs_one_active_key ON job_runs (job) WHERE status IN ('queued', 'running');

-- History pages, newest first, per job (keyset on id).
CREATE INDEX job_runs_job_id_idx ON job_runs (job, id DESC);

-- Idempotency-Key records of the HTTP API (scope = route and job); expired rows are purged
-- by the data-retention job.
CREATE TABLE idempotency_keys (
    id              bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    key             uuid NOT NULL,
    scope           text NOT NULL,
    request_hash    text NOT NULL,
    response_status int,
    response_json   jsonb,
    status          text NOT NULL DEFAULT 'PENDING' CHECK (status IN ('PENDING', 'COMPLETED', 'FAILED')),
    created_at      timestamptz NOT NULL DEFAULT now(),
    expires_at      timestamptz NOT NULL,
    UNIQUE (key, scope)
);
CREATE INDEX idempotency_keys_expires_at_idx ON idempotency_keys (expires_at);

-- The leader wakes up at once for a new manual run; polling is only the fallback.
CREATE FUNCTION job_runs_notify_queued() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('scheduler_runs', NEW.id::text);
    RETURN NULL;
END $$;

CREATE TRIGGER job_runs_queued_notify
    AFTER INSERT OR UPDATE OF status, cancel_requested ON job_runs
    FOR EACH ROW WHEN (NEW.status = 'queued' OR NEW.cancel_requested)
    EXECUTE FUNCTION job_runs_notify_queued();
