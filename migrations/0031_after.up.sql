-- Jobs that follow jobs (docs/runtime-jobs.md, "after"): a runtime job may name parents in
-- its namespace; each slot of its first parent whose parents' runs all succeeded becomes one
-- run of the child, created by the transaction that ends the last parent run it waited for
-- (internal/store/after.go). The child's row is its slot's row: job = the child,
-- scheduled_at = the first parent's slot, rerun 0, so the slot index (job, scheduled_at,
-- rerun) keeps it to one row whatever re-runs, recoveries or leaders end the parents again.

-- A definition's parents as job keys, in its order (the first parent first); NULL without
-- `after`. Generated, so every writer of a definition keeps it true, and indexed, so that
-- the end of a run finds its job's children by an index read.
CREATE FUNCTION job_after_keys(name text, after jsonb) RETURNS text[]
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    RETURN CASE WHEN jsonb_typeof(after) = 'array' AND jsonb_array_length(after) > 0 THEN
        ARRAY(SELECT CASE WHEN strpos(name, '/') > 0 THEN split_part(name, '/', 1) || '/' || p ELSE p END
              FROM jsonb_array_elements_text(after) WITH ORDINALITY AS a (p, i) ORDER BY i)
    END;
ALTER TABLE job_definitions ADD COLUMN after_keys text[]
    GENERATED ALWAYS AS (job_after_keys(name, definition->'after')) STORED;
-- A parent's children, by an index read (store/after.go); and the jobs that have children,
-- which every end statement reads (store/runs_end.go): only chained definitions have
-- entries, so with 12 000 definitions of which 20 chained that read took 0.07 ms, against
-- 1.6 ms for the table's scan without it.
CREATE INDEX job_definitions_after_keys_idx ON job_definitions USING gin (after_keys);

-- A child's run names the parent runs it came from (a skipped slot: the parent run that failed).
ALTER TABLE job_runs ADD COLUMN parent_run_ids bigint[];

ALTER TABLE job_runs DROP CONSTRAINT job_runs_trigger_check;
ALTER TABLE job_runs ADD CONSTRAINT job_runs_trigger_check
    CHECK (trigger IN ('schedule', 'manual', 'catch-up', 'recovery', 'rerun', 'backfill', 'after'));
ALTER TABLE job_runs DROP CONSTRAINT job_runs_check;
ALTER TABLE job_runs ADD CONSTRAINT job_runs_check
    CHECK (scheduled_at IS NULL OR trigger IN ('schedule', 'catch-up', 'rerun', 'backfill', 'after'));
ALTER TABLE job_runs ADD CONSTRAINT job_runs_after_check
    CHECK ((trigger = 'after') = (parent_run_ids IS NOT NULL));

-- A child's slot whose parents succeeded while the child had its bound of active runs
-- (overlap): it waits here, and the end of the child's active run queues it, in the same
-- transaction. One row per slot, and none while the slot has its row in job_runs.
CREATE TABLE scheduler_after_waiting (
    job            text NOT NULL,
    scheduled_at   timestamptz NOT NULL,
    parent_run_ids bigint[] NOT NULL,
    partition_id   int NOT NULL DEFAULT 0,
    created_at     timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (job, scheduled_at)
);

-- The runs of a job's slot: its rows, and the recovery runs that re-ran them (recursively).
CREATE FUNCTION job_slot_runs(job text, slot timestamptz) RETURNS TABLE (id bigint, status text, created_at timestamptz)
    LANGUAGE sql STABLE PARALLEL SAFE
    BEGIN ATOMIC
        WITH RECURSIVE s AS (
            SELECT r.id, r.status, r.created_at, 0 AS depth FROM job_runs r
            WHERE r.job = job_slot_runs.job AND r.scheduled_at = job_slot_runs.slot
            UNION ALL
            SELECT r.id, r.status, r.created_at, s.depth + 1 FROM job_runs r JOIN s ON r.recovers_run_id = s.id
            WHERE s.depth < 100
        )
        SELECT s.id, s.status, s.created_at FROM s;
    END;

-- The slot a run did: its own, or, for a recovery run, the slot of the run it recovered.
CREATE FUNCTION job_run_slot(run_id bigint) RETURNS timestamptz
    LANGUAGE sql STABLE PARALLEL SAFE
    BEGIN ATOMIC
        WITH RECURSIVE c AS (
            SELECT r.scheduled_at, r.recovers_run_id, 0 AS depth FROM job_runs r WHERE r.id = job_run_slot.run_id
            UNION ALL
            SELECT r.scheduled_at, r.recovers_run_id, c.depth + 1 FROM job_runs r JOIN c ON r.id = c.recovers_run_id
            WHERE c.scheduled_at IS NULL AND c.depth < 100
        )
        SELECT c.scheduled_at FROM c WHERE c.scheduled_at IS NOT NULL LIMIT 1;
    END;
