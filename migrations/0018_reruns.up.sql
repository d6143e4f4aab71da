-- Re-runs and backfills (docs/design.md, "Re-runs and backfills"): a slot may have more rows
-- than its own run. A re-run (trigger rerun) or a backfill run (trigger backfill) does the
-- slot again under its scheduled_at, so it carries the slot's Idempotency-Key and lands in the
-- slot's day partition. `rerun` numbers a slot's rows: 0 for the slot's own run (claimed by
-- the timers or the catch-up, once, as before), 1, 2, ... for each later one. The slot's
-- unique index takes it as its third column: a slot is still claimed once, and its range
-- scans by (job, scheduled_at) are unchanged.
ALTER TABLE job_runs ADD COLUMN rerun integer NOT NULL DEFAULT 0 CHECK (rerun >= 0);

ALTER TABLE job_runs DROP CONSTRAINT job_runs_trigger_check;
ALTER TABLE job_runs ADD CONSTRAINT job_runs_trigger_check
    CHECK (trigger IN ('schedule', 'manual', 'catch-up', 'recovery', 'rerun', 'backfill'));
ALTER TABLE job_runs DROP CONSTRAINT job_runs_check;
ALTER TABLE job_runs ADD CONSTRAINT job_runs_check
    CHECK (scheduled_at IS NULL OR trigger IN ('schedule', 'catch-up', 'rerun', 'backfill'));
ALTER TABLE job_runs DROP CONSTRAINT job_runs_check1;
ALTER TABLE job_runs ADD CONSTRAINT job_runs_check1
    CHECK (scheduled_at IS NOT NULL OR trigger IN ('manual', 'recovery'));
-- Only a re-run or a backfill counts past 0.
ALTER TABLE job_runs ADD CONSTRAINT job_runs_rerun_check1
    CHECK ((rerun = 0) = (trigger NOT IN ('rerun', 'backfill')));

CREATE OR REPLACE FUNCTION job_runs_partition_indexes(t text) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    -- A schedule slot is claimed once, whatever replica or epoch tries; its re-runs count on.
    EXECUTE format('CREATE UNIQUE INDEX %I ON %I (job, scheduled_at, rerun) WHERE scheduled_at IS NOT NULL',
                   t || '_slot_key', t);
    -- At most one queued-or-running run per job.
    EXECUTE format('CREATE UNIQUE INDEX %I ON %I (job) WHERE status IN (''queued'', ''running'')',
                   t || '_one_active_key', t);
    -- An abandoned run is recovered once.
    EXECUTE format('CREATE UNIQUE INDEX %I ON %I (recovers_run_id)', t || '_recovers_run_id_key', t);
END $$;

-- Every existing partition's slot index takes the new column.
DO $$
DECLARE
    t text;
BEGIN
    FOR t IN SELECT c.relname FROM pg_class c JOIN pg_index i ON i.indrelid = c.oid
             JOIN pg_class ix ON ix.oid = i.indexrelid
             WHERE ix.relname = c.relname || '_slot_key' AND c.relname LIKE 'job_runs%'
    LOOP
        EXECUTE format('DROP INDEX %I', t || '_slot_key');
        EXECUTE format('CREATE UNIQUE INDEX %I ON %I (job, scheduled_at, rerun) WHERE scheduled_at IS NOT NULL',
                       t || '_slot_key', t);
    END LOOP;
END $$;

-- Backfills: a job's slots from since to until, chosen once when it is asked for, run one at
-- a time in order by the leader. next is the index in slots of the next slot to queue; run_id
-- the run of the slot queued last (its end lets the next one go).
CREATE TABLE scheduler_backfills (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    job         text NOT NULL,
    since       timestamptz NOT NULL,
    until       timestamptz NOT NULL,
    only_status text NOT NULL CHECK (only_status IN ('missed', 'failed', 'all')),
    slots       timestamptz[] NOT NULL,
    next        integer NOT NULL DEFAULT 0,
    run_id      bigint,
    state       text NOT NULL DEFAULT 'running' CHECK (state IN ('running', 'done', 'cancelled')),
    created_at  timestamptz NOT NULL DEFAULT now(),
    updated_at  timestamptz NOT NULL DEFAULT now(),
    CHECK (next BETWEEN 0 AND cardinality(slots))
);
-- One backfill at a time per job: the one the leader works on.
CREATE UNIQUE INDEX scheduler_backfills_one_running ON scheduler_backfills (job) WHERE state = 'running';

DO $$
DECLARE
    def text;
BEGIN
    SELECT pg_get_constraintdef(oid) INTO def FROM pg_constraint
    WHERE conrelid = 'operator_actions'::regclass AND conname = 'operator_actions_action_check';
    ALTER TABLE operator_actions DROP CONSTRAINT operator_actions_action_check;
    EXECUTE format('ALTER TABLE operator_actions ADD CONSTRAINT operator_actions_action_check CHECK (action IN (%L, %L, %L) OR %s)',
                   'rerun', 'backfill', 'backfill-cancel', substring(def FROM '^CHECK (.*)$'));
END $$;
