-- Appointments: organizations (each in its own time zone) and the appointments booked with
-- them. Seven jobs read them (internal/jobs/appointment_*.go, no_show_*.go): five send one
-- message per appointment and kind, no-show-detection moves BOOKED → NO_SHOW, no-show-rate
-- sends one notice per organization and local date.

CREATE TABLE organizations (
    id                bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    name              text NOT NULL UNIQUE,
    -- An IANA zone name (Europe/Paris). Not checked here, as for groups: no-show-rate loads
    -- it with the scheduler's zone database and skips (and counts) an organization whose
    -- zone it cannot load.
    timezone          text NOT NULL DEFAULT 'UTC',
    -- Where no-show-rate sends its notice.
    admin_email       text NOT NULL,
    -- No-show rate (0..1) over the last 7 local days at or above which no-show-rate notifies.
    no_show_threshold numeric(4, 3) NOT NULL DEFAULT 0.200 CHECK (no_show_threshold > 0 AND no_show_threshold <= 1),
    created_at        timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE appointments (
    id              bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    organization_id bigint NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
    -- The contact is reached by email when there is one, else by SMS.
    contact_email   text,
    contact_phone   text,
    host_email      text NOT NULL,
    start_at        timestamptz NOT NULL,
    end_at          timestamptz NOT NULL,
    status          text NOT NULL DEFAULT 'BOOKED'
                    CHECK (status IN ('BOOKED', 'CANCELLED', 'COMPLETED', 'NO_SHOW')),
    booked_at       timestamptz NOT NULL DEFAULT now(),
    checked_in_at   timestamptz,
    -- Set by no-show-detection with the move to NO_SHOW.
    no_show_at      timestamptz,
    created_at      timestamptz NOT NULL DEFAULT now(),
    CHECK (end_at >= start_at),
    CHECK (contact_email IS NOT NULL OR contact_phone IS NOT NULL),
    -- The last line of defence of no-show-detection: an appointment checked in is never a
    -- no-show, whatever races with the check-in.
    CHECK (status <> 'NO_SHOW' OR checked_in_at IS NULL),
    CHECK ((status = 'NO_SHOW') = (no_show_at IS NOT NULL))
);

-- The scans of the jobs that read BOOKED appointments by start: reminders-day,
-- reminders-hour, start-notifications and no-show-detection (each a range of start_at).
CREATE INDEX appointments_booked_start_idx ON appointments (start_at, id) WHERE status = 'BOOKED';
-- appointment-confirmations' scan: BOOKED appointments by booking time.
CREATE INDEX appointments_booked_booked_at_idx ON appointments (booked_at, id) WHERE status = 'BOOKED';
-- no-show-recovery's scan: NO_SHOW appointments by start.
CREATE INDEX appointments_no_show_start_idx ON appointments (start_at, id) WHERE status = 'NO_SHOW';
-- no-show-rate's count per organization over its last 7 local days (an index-only scan).
CREATE INDEX appointments_organization_start_idx ON appointments (organization_id, start_at) INCLUDE (status);

-- Exactly one message per (appointment, kind), whatever the provider, channel or recipient
-- (the unique (provider, channel, "to", payload_hash) alone would let a changed address or a
-- switched sender through), and the jobs' "not claimed yet" look-up. The appointment jobs'
-- payloads carry appointment_id and their template is the kind; other messages have no
-- appointment_id, so their key is NULL and never conflicts. One text column on purpose: a
-- look-up by kind and appointment is then a single equality, which the planner can only
-- serve by a probe of this index or a scan costed at the table's real size, never by a
-- cheap-looking scan of "the few rows of this template" that stale statistics would invite.
CREATE UNIQUE INDEX message_deliveries_appointment_kind_key
    ON message_deliveries ((template || ':' || (payload ->> 'appointment_id')));
-- Exactly one no-show-rate notice per (organization, local date).
CREATE UNIQUE INDEX message_deliveries_no_show_rate_key
    ON message_deliveries (((payload ->> 'organization_id')::bigint), (payload ->> 'local_date'))
    WHERE template = 'no-show-rate';
