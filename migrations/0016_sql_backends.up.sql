-- The backend each running SQL job's run has in its target (docs/design.md guarantee 12):
-- written by the leader when the run connects, before its statements run, and read by the
-- next leader when it marks the run abandoned, to end a backend that a replica which died
-- left running (a loop that traps cancels never notices its client is gone). The pid alone
-- could name a later backend; backend_start makes it one backend's.
CREATE TABLE scheduler_sql_backends (
    run_id        bigint      PRIMARY KEY,
    target        text        NOT NULL,
    pid           integer     NOT NULL,
    backend_start timestamptz NOT NULL,
    recorded_at   timestamptz NOT NULL DEFAULT now()
);
REVOKE ALL ON scheduler_sql_backends FROM PUBLIC;
