-- Membership: tenants, their plans, members and the history of plan changes. The plan-change
-- and status-sync jobs change these tables (internal/jobs/plan_change.go, status_sync.go).

CREATE TABLE tenants (
    id         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    name       text NOT NULL UNIQUE,
    created_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE membership_plans (
    id            bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    tenant_id     bigint NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    name          text NOT NULL,
    price         numeric(10, 2) NOT NULL CHECK (price >= 0),
    duration_days int NOT NULL CHECK (duration_days > 0),
    is_active     boolean NOT NULL DEFAULT true,
    created_at    timestamptz NOT NULL DEFAULT now(),
    UNIQUE (tenant_id, name)
);

CREATE TABLE members (
    id                            bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    tenant_id                     bigint NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    email                         text NOT NULL,
    status                        text NOT NULL DEFAULT 'ACTIVE' CHECK (status IN ('ACTIVE', 'INACTIVE')),
    membership_plan_id            bigint REFERENCES membership_plans (id),
    membership_start_date         date,
    membership_end_date           date,
    -- A plan change scheduled for later; plan-change applies it on its start date.
    pending_membership_plan_id    bigint REFERENCES membership_plans (id),
    pending_membership_start_date date,
    pending_membership_end_date   date,
    pending_membership_price      numeric(10, 2),
    created_at                    timestamptz NOT NULL DEFAULT now(),
    updated_at                    timestamptz NOT NULL DEFAULT now(),
    UNIQUE (tenant_id, email),
    CHECK (pending_membership_plan_id IS NULL OR pending_membership_start_date IS NOT NULL)
);

-- plan-change's scan: only members with a pending plan are in this index, in the order the
-- job walks them (keyset on start date, id), so a run reads the due members and nothing else.
CREATE INDEX members_pending_start_idx ON members (pending_membership_start_date, id)
    WHERE pending_membership_plan_id IS NOT NULL;

-- status-sync's scan: ACTIVE members by end date, walked by (end date, id).
CREATE INDEX members_active_end_idx ON members (membership_end_date, id)
    WHERE status = 'ACTIVE';

CREATE TABLE member_plan_change_history (
    id             bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    member_id      bigint NOT NULL REFERENCES members (id) ON DELETE CASCADE,
    from_plan_id   bigint REFERENCES membership_plans (id),
    to_plan_id     bigint REFERENCES membership_plans (id),
    change_type    text NOT NULL CHECK (change_type IN ('SCHEDULED', 'APPLIED', 'CANCELLED')),
    effective_date date NOT NULL,
    -- The job_runs row that wrote it. No foreign key: data-retention purges old runs, the
    -- history stays.
    run_id         bigint,
    created_at     timestamptz NOT NULL DEFAULT now()
);

-- The last line of defence of plan-change's "exactly once per member and effective date":
-- whatever the locks and guards miss, a second APPLIED row cannot exist.
CREATE UNIQUE INDEX member_plan_change_history_applied_key
    ON member_plan_change_history (member_id, effective_date) WHERE change_type = 'APPLIED';
CREATE INDEX member_plan_change_history_member_idx ON member_plan_change_history (member_id, created_at);
