-- The audit log of the console and the API: every action an operator took (trigger, cancel,
-- pause, resume, step-down), with which kind of token, why, from where and under which
-- request id (the id in the replica's log lines and in problem answers). run_id is not a
-- foreign key on purpose: data-retention purges runs sooner than the record of who started
-- or cancelled them.
CREATE TABLE operator_actions (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    at          timestamptz NOT NULL DEFAULT now(),
    action      text NOT NULL CHECK (action IN ('trigger', 'cancel', 'pause', 'resume', 'step-down')),
    job         text,
    run_id      bigint,
    token_kind  text NOT NULL,
    reason      text,
    request_id  text NOT NULL,
    remote_addr text NOT NULL
);
-- data-retention deletes by age, batch by batch along the primary key.
CREATE INDEX operator_actions_at_idx ON operator_actions (at);
