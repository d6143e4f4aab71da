DROP INDEX IF EXISTS job_definitions_partition_idx;
ALTER TABLE job_runs DROP COLUMN IF EXISTS partition_id;
ALTER TABLE job_definitions DROP COLUMN IF EXISTS partition_id;
DROP FUNCTION IF EXISTS scheduler_partition_of(text, int);
ALTER TABLE scheduler_leader DROP COLUMN IF EXISTS renewed_at;
DROP TABLE IF EXISTS scheduler_partitions;
DROP TABLE IF EXISTS scheduler_cluster;
