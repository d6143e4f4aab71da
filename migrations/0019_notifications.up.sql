-- Notifications per job (issue 32): a job's team hears that it failed, timed out, missed a
-- slot, recovered or was paused, without Prometheus rules of its own.
--
-- Two tables, for the two halves of the promise (docs/design.md, "Notifications to teams"):
-- an event row is written in the same fenced transaction as the fact it reports (a run's
-- final status, the missed rows, the pause), so it exists exactly once per run and type
-- however the leader dies; a delivery row is one message to one destination, sent at least
-- once by the leader under a stable webhook-id.

-- One row per (run, event type). run_id is NULL only for a pause an operator asked for
-- through the API, which has no run; each such pause is its own row.
CREATE TABLE scheduler_notifications (
    id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    job          text NOT NULL,
    event        text NOT NULL CHECK (event IN ('failed', 'timed_out', 'missed', 'recovered', 'paused')),
    run_id       bigint,
    -- A snapshot of the run as the fact recorded it, so a message still says what happened
    -- after data-retention dropped the run's day.
    scheduled_at timestamptz,
    status       text,
    error        text,
    -- A pause's reason (who paused, or after how many failed runs).
    detail       text,
    created_at   timestamptz NOT NULL DEFAULT now(),
    -- When the leader put the event into its messages (the deliveries); NULL while it waits
    -- for its coalescing interval.
    grouped_at   timestamptz
);
-- The guarantee's last line of defence: one event per run and type.
CREATE UNIQUE INDEX scheduler_notifications_run_event_key ON scheduler_notifications (run_id, event) WHERE run_id IS NOT NULL;
-- The leader's coalescing reads the waiting events every second.
CREATE INDEX scheduler_notifications_waiting_idx ON scheduler_notifications (job, event, id) WHERE grouped_at IS NULL;
CREATE INDEX scheduler_notifications_created_at_idx ON scheduler_notifications (created_at);

-- One message to one destination: the events of one job and type gathered over the
-- coalescing interval. The body is built once, so every attempt on every leader sends the
-- same bytes under the same webhook_id, which a receiver deduplicates by.
CREATE TABLE scheduler_notification_deliveries (
    id              bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    job             text NOT NULL,
    event           text NOT NULL CHECK (event IN ('failed', 'timed_out', 'missed', 'recovered', 'paused')),
    webhook_id      uuid NOT NULL UNIQUE DEFAULT gen_random_uuid(),
    -- The destination as the definition names it: a webhook URL with its signing secret's
    -- name, or a Slack URL secret's name. Never a secret's value.
    kind            text NOT NULL CHECK (kind IN ('webhook', 'slack')),
    url             text,
    secret          text,
    run_ids         bigint[] NOT NULL,
    count           integer NOT NULL CHECK (count > 0),
    body            bytea NOT NULL,
    status          text NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'sent', 'failed')),
    attempts        integer NOT NULL DEFAULT 0,
    next_attempt_at timestamptz NOT NULL DEFAULT now(),
    last_status     integer,
    last_error      text,
    created_at      timestamptz NOT NULL DEFAULT now(),
    sent_at         timestamptz
);
CREATE INDEX scheduler_notification_deliveries_pending_idx ON scheduler_notification_deliveries (next_attempt_at, id) WHERE status = 'pending';
CREATE INDEX scheduler_notification_deliveries_job_idx ON scheduler_notification_deliveries (job, id DESC);
CREATE INDEX scheduler_notification_deliveries_created_at_idx ON scheduler_notification_deliveries (created_at);
