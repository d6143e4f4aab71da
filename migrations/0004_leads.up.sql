-- Lead capture: forms, the leads that start them, and the record of every message sent,
-- which de-duplicates notifications (abandon-recovery, internal/jobs/abandon_recovery.go).

CREATE TABLE forms (
    id         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    tenant_id  bigint NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    name       text NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    UNIQUE (tenant_id, name)
);

CREATE TABLE leads (
    id               bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    form_id          bigint NOT NULL REFERENCES forms (id) ON DELETE CASCADE,
    tenant_id        bigint NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    -- The visitor session that started the form: one lead per session.
    session_id       text NOT NULL UNIQUE,
    email            text,
    phone            text,
    -- How the lead wants to be contacted, and so how a recovery message reaches them.
    channel          text NOT NULL DEFAULT 'EMAIL' CHECK (channel IN ('EMAIL', 'SMS', 'WHATSAPP')),
    started_at       timestamptz NOT NULL,
    submitted_at     timestamptz,
    -- Set by abandon-recovery when it claims the lead's recovery message: the lead is then
    -- abandoned and never claimed again.
    abandoned_at     timestamptz,
    recovery_sent_at timestamptz,
    created_at       timestamptz NOT NULL DEFAULT now(),
    CHECK (channel = 'EMAIL' AND email IS NOT NULL OR channel <> 'EMAIL' AND phone IS NOT NULL)
);

-- abandon-recovery's scan: only leads not yet submitted nor claimed, by start time.
CREATE INDEX leads_unclaimed_started_idx ON leads (started_at, id)
    WHERE submitted_at IS NULL AND abandoned_at IS NULL;
-- data-retention's scan of old abandoned leads.
CREATE INDEX leads_abandoned_idx ON leads (abandoned_at) WHERE submitted_at IS NULL AND abandoned_at IS NOT NULL;

CREATE TABLE message_deliveries (
    id                  bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    provider            text NOT NULL,
    channel             text NOT NULL CHECK (channel IN ('EMAIL', 'SMS', 'WHATSAPP')),
    "to"                text NOT NULL,
    template            text NOT NULL,
    -- SHA-256 (hex) of the canonical JSON payload; with provider, channel and "to" it names a
    -- message, so the same message is claimed once whoever tries to send it.
    payload_hash        text NOT NULL,
    payload             jsonb NOT NULL,
    status              text NOT NULL DEFAULT 'PENDING' CHECK (status IN ('PENDING', 'SENT', 'DELIVERED', 'FAILED')),
    provider_message_id text,
    error               text,
    -- How many times the message was handed to a sender (more than 1 only when a claim
    -- orphaned by a crash was resent under the same idempotency key).
    attempts            int NOT NULL DEFAULT 0,
    created_at          timestamptz NOT NULL DEFAULT now(),
    -- When the current sender claimed the message; a PENDING claim older than the claim
    -- timeout was orphaned by a crash.
    claimed_at          timestamptz NOT NULL DEFAULT now(),
    sent_at             timestamptz,
    delivered_at        timestamptz,
    lead_id             bigint REFERENCES leads (id) ON DELETE SET NULL,
    UNIQUE (provider, channel, "to", payload_hash)
);

-- abandon-recovery's scan of orphaned claims.
CREATE INDEX message_deliveries_pending_idx ON message_deliveries (claimed_at, id) WHERE status = 'PENDING';
-- data-retention's scan, and the ON DELETE SET NULL of a purged lead.
CREATE INDEX message_deliveries_created_at_idx ON message_deliveries (created_at);
CREATE INDEX message_deliveries_lead_idx ON message_deliveries (lead_id);
