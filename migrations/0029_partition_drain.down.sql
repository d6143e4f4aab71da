DELETE FROM scheduler_control WHERE kind = 'drain';
DROP INDEX IF EXISTS scheduler_control_drain_idx;
ALTER TABLE scheduler_control DROP CONSTRAINT IF EXISTS scheduler_control_drain_names_instance;
ALTER TABLE scheduler_control DROP COLUMN IF EXISTS instance_id;
ALTER TABLE scheduler_control DROP CONSTRAINT scheduler_control_kind_check;
ALTER TABLE scheduler_control ADD CONSTRAINT scheduler_control_kind_check CHECK (kind IN ('step-down'));
