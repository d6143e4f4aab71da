-- Partitioned leadership (docs/design.md, "Partitions"): runtime jobs hash by key onto a
-- fixed number of partitions, each led under its own advisory lock, epoch and term id.
-- Partition 0 is the coordinator's: its fence stays the scheduler_leader row, and it runs
-- the built-in jobs and the cluster-wide duties. Partitions 1..N-1 have a row here.

-- The number of partitions, fixed when the cluster is made (SCHEDULER_PARTITIONS, written
-- by the first replica that starts); docs/operations.md says how to change it.
CREATE TABLE scheduler_cluster (
    id         int PRIMARY KEY DEFAULT 1 CHECK (id = 1),
    partitions int NOT NULL CHECK (partitions BETWEEN 1 AND 1024),
    created_at timestamptz NOT NULL DEFAULT now()
);

-- One row per partition other than the coordinator's: who holds it under which term, and
-- when its holder last renewed it (a holder whose renewal is older than the lease is dead or
-- paused, and its lock is taken from it).
CREATE TABLE scheduler_partitions (
    partition_id int PRIMARY KEY CHECK (partition_id BETWEEN 1 AND 1023),
    epoch        bigint NOT NULL DEFAULT 0,
    term_id      uuid,
    timeline     bigint,
    holder       text,
    since        timestamptz,
    renewed_at   timestamptz,
    -- Elections of the partition that changed its holder, for the flapping alert.
    handovers    bigint NOT NULL DEFAULT 0
);

-- The coordinator's renewal, for the same takeover of a paused leader.
ALTER TABLE scheduler_leader ADD COLUMN renewed_at timestamptz;

-- The partition of a runtime job key: md5, so that it never changes with the server's
-- version or platform (hashtext may). Built-in jobs are always partition 0.
CREATE FUNCTION scheduler_partition_of(job_key text, partitions int) RETURNS int
    LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
    RETURN (('x' || substr(md5(job_key), 1, 8))::bit(32)::bigint % partitions)::int;

-- Runs and definitions carry their partition, so that a distributed PostgreSQL can place a
-- partition's rows together (docs/design.md, "Scaling"). A constant default rewrites nothing.
ALTER TABLE job_definitions ADD COLUMN partition_id int NOT NULL DEFAULT 0 CHECK (partition_id >= 0);
ALTER TABLE job_runs ADD COLUMN partition_id int NOT NULL DEFAULT 0;
CREATE INDEX job_definitions_partition_idx ON job_definitions (partition_id);
