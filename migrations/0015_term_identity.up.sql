-- Issue 29: a PostgreSQL failover with asynchronous replication can lose acknowledged commits.
-- Nothing a lost term did may be named again by the history that survives it.

-- The timeline the server writes WAL on now. A promotion starts a new timeline, so a value read
-- on the promoted standby differs from every value read on the primary it replaced (the
-- standby followed that primary's timeline). Read from the WAL insert position, not from
-- pg_control_checkpoint(), which lags a promotion until its first checkpoint.
CREATE FUNCTION scheduler_timeline() RETURNS bigint LANGUAGE sql VOLATILE
RETURN ('x' || substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8))::bit(32)::int::bigint;

-- A term is its epoch and a random term id drawn by the bump that began it: a rollback can
-- bring an old epoch number back, never the id, and the fence compares both. timeline is
-- the one the term began on: the next leader compares it with its own to see a failover.
ALTER TABLE scheduler_leader ADD COLUMN term_id uuid, ADD COLUMN timeline bigint;

-- Run ids: the day (as in 0013), then 33 bits of the sequence, then the timeline modulo 16.
-- A rollback takes the sequence back, but the ids the new primary issues carry the next
-- timeline, so they differ from every id the lost history issued: an id a receiver logged
-- never names another run. Ids stay ordered by day, and within a day by the sequence, as
-- before; the sequence part wraps after 2^33 runs (0013's after 2^37).
CREATE OR REPLACE FUNCTION job_run_id(ts timestamptz) RETURNS bigint LANGUAGE sql VOLATILE
RETURN CASE WHEN ts < job_run_cutover() THEN nextval('job_runs_id_seq')
            ELSE job_run_day_start(job_run_day(ts))
                 | ((nextval('job_runs_id_seq') & 8589934591) << 4)
                 | (scheduler_timeline() & 15) END;

-- The audit log records the failovers a leader repaired. The check is extended, not
-- restated, so an action another migration added stays allowed.
DO $$
DECLARE
    def text;
BEGIN
    SELECT pg_get_constraintdef(oid) INTO def FROM pg_constraint
    WHERE conrelid = 'operator_actions'::regclass AND conname = 'operator_actions_action_check';
    ALTER TABLE operator_actions DROP CONSTRAINT operator_actions_action_check;
    EXECUTE format('ALTER TABLE operator_actions ADD CONSTRAINT operator_actions_action_check CHECK (action = %L OR %s)',
                   'failover', substring(def FROM '^CHECK (.*)$'));
END $$;
