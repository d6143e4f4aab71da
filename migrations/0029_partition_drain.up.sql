-- Partitioned leadership, the holders' side (docs/design.md, "Partitions").

-- An operator's drain (POST /v1/instances/{id}/drain): the named replica releases its
-- partitions, steps down as coordinator if it is, and takes nothing until it restarts. A
-- drain names a replica, not a term: its epoch is 0 and instance_id says whom it is for.
ALTER TABLE scheduler_control DROP CONSTRAINT scheduler_control_kind_check;
ALTER TABLE scheduler_control ADD CONSTRAINT scheduler_control_kind_check CHECK (kind IN ('step-down', 'drain'));
ALTER TABLE scheduler_control ADD COLUMN instance_id text;
ALTER TABLE scheduler_control ADD CONSTRAINT scheduler_control_drain_names_instance
    CHECK ((kind = 'drain') = (instance_id IS NOT NULL));
CREATE INDEX scheduler_control_drain_idx ON scheduler_control (instance_id) WHERE kind = 'drain';

-- A login that could lock a partition's row FOR UPDATE would hold up its holder's heartbeat
-- and every election of it: the tables are the scheduler's own (the defaults grant PUBLIC
-- nothing; this says so where a reviewer looks).
REVOKE ALL ON scheduler_partitions, scheduler_cluster FROM PUBLIC;

-- A drain is audited as its own action.
DO $$
DECLARE
    def text;
BEGIN
    SELECT pg_get_constraintdef(oid) INTO def FROM pg_constraint
    WHERE conrelid = 'operator_actions'::regclass AND conname = 'operator_actions_action_check';
    ALTER TABLE operator_actions DROP CONSTRAINT operator_actions_action_check;
    EXECUTE format('ALTER TABLE operator_actions ADD CONSTRAINT operator_actions_action_check CHECK (action IN (%L) OR %s)',
                   'drain', substring(def FROM '^CHECK (.*)$'));
END $$;
