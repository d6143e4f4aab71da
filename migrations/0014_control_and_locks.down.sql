CREATE OR REPLACE FUNCTION scheduler_add_run_day(day date) RETURNS boolean LANGUAGE plpgsql AS $$
DECLARE
    lo bigint := job_run_day_start(day - date '1970-01-01');
    hi bigint := job_run_day_start(day - date '1970-01-01' + 1);
    runs text := 'job_runs_p' || to_char(day, 'YYYYMMDD');
    attempts text := 'run_attempts_p' || to_char(day, 'YYYYMMDD');
BEGIN
    PERFORM pg_advisory_xact_lock(hashtextextended('scheduler:run_partitions', 0));
    IF to_regclass(runs) IS NOT NULL THEN
        RETURN false;
    END IF;
    EXECUTE format('CREATE TABLE %I (LIKE job_runs INCLUDING DEFAULTS INCLUDING CONSTRAINTS)', runs);
    PERFORM job_runs_partition_indexes(runs);
    EXECUTE format('CREATE TABLE %I (LIKE run_attempts INCLUDING DEFAULTS INCLUDING CONSTRAINTS)', attempts);
    EXECUTE format('ALTER TABLE job_runs_days ATTACH PARTITION %I FOR VALUES FROM (%s) TO (%s)', runs, lo, hi);
    EXECUTE format('ALTER TABLE run_attempts ATTACH PARTITION %I FOR VALUES FROM (%s) TO (%s)', attempts, lo, hi);
    RETURN true;
END $$;
DROP TABLE scheduler_locks;
DROP TABLE scheduler_control;
