-- Daily rounds of the social app: each group gets one round a day, created for the group's
-- local date, opened at the group's local drop time and closed 24 hours later
-- (jobs rounds-create, rounds-open, rounds-close).

CREATE TABLE groups (
    id         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    name       text NOT NULL,
    -- An IANA zone name (Europe/Paris). Not checked here: PostgreSQL and the scheduler each
    -- carry their own copy of the zone database, so the jobs validate it when they use it and
    -- skip (and count) a group whose zone they cannot load, instead of failing a whole batch.
    timezone   text NOT NULL DEFAULT 'UTC',
    is_active  boolean NOT NULL DEFAULT true,
    created_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE group_settings (
    group_id  bigint PRIMARY KEY REFERENCES groups (id) ON DELETE CASCADE,
    -- Local wall-clock time at which the group's round opens.
    drop_time time NOT NULL DEFAULT '09:00'
);

CREATE TABLE group_prompts (
    id        bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    group_id  bigint NOT NULL REFERENCES groups (id) ON DELETE CASCADE,
    text      text NOT NULL,
    is_active boolean NOT NULL DEFAULT true,
    -- Target of daily_rounds' composite foreign key: a round can only use its own group's prompt.
    UNIQUE (group_id, id)
);
CREATE INDEX group_prompts_active_idx ON group_prompts (group_id) WHERE is_active;

CREATE TABLE daily_rounds (
    id              bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    group_id        bigint NOT NULL REFERENCES groups (id) ON DELETE CASCADE,
    group_prompt_id bigint NOT NULL,
    -- The group's local date the round belongs to.
    scheduled_for   date NOT NULL,
    status          text NOT NULL DEFAULT 'scheduled' CHECK (status IN ('scheduled', 'open', 'closed')),
    open_at         timestamptz,
    close_at        timestamptz,
    created_at      timestamptz NOT NULL DEFAULT now(),
    closed_at       timestamptz,
    FOREIGN KEY (group_id, group_prompt_id) REFERENCES group_prompts (group_id, id),
    -- The timestamps each status implies, so no transition can leave a half-written round.
    CHECK ((status = 'scheduled') = (open_at IS NULL)),
    CHECK ((status = 'scheduled') = (close_at IS NULL)),
    CHECK ((status = 'closed') = (closed_at IS NOT NULL)),
    CHECK (close_at >= open_at),
    -- The last line of defence of rounds-create: one round per group and local date, whatever
    -- two concurrent runs decide.
    UNIQUE (group_id, scheduled_for)
);

-- The status indexes, partial so each stays as small as the work it serves: rounds-open streams
-- scheduled rounds by date, rounds-close streams open rounds by close_at (both keyset on id).
CREATE INDEX daily_rounds_scheduled_idx ON daily_rounds (scheduled_for, id) WHERE status = 'scheduled';
CREATE INDEX daily_rounds_open_close_at_idx ON daily_rounds (close_at, id) WHERE status = 'open';
CREATE INDEX daily_rounds_open_at_idx ON daily_rounds (open_at);
-- A prompt's last use, for rounds-create's least-recently-used choice.
CREATE INDEX daily_rounds_prompt_idx ON daily_rounds (group_prompt_id, scheduled_for);

-- Transitions go only scheduled -> open -> closed. The jobs guard every UPDATE by the current
-- status; this trigger refuses any other change, whoever writes.
CREATE FUNCTION daily_rounds_guard_transition() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.status IS DISTINCT FROM OLD.status
       AND NOT ((OLD.status = 'scheduled' AND NEW.status = 'open')
             OR (OLD.status = 'open' AND NEW.status = 'closed')) THEN
        RAISE EXCEPTION 'daily round %: transition % -> % is not allowed (only scheduled -> open -> closed)',
            OLD.id, OLD.status, NEW.status
            USING ERRCODE = 'check_violation';
    END IF;
    RETURN NEW;
END $$;

CREATE TRIGGER daily_rounds_transition_guard
    BEFORE UPDATE OF status ON daily_rounds
    FOR EACH ROW EXECUTE FUNCTION daily_rounds_guard_transition();
