-- The keys the scheduler signs its targets' OIDC tokens with (docs/operations.md, "OIDC
-- tokens for targets"). A key goes next -> current -> previous -> retired:
--   next      published in the JWKS, signs nothing yet: verifiers learn it before its first
--             token (pre-publication);
--   current   signs every token; at most one;
--   previous  signs nothing, stays published until every token it signed has expired;
--   retired   no longer published; its private half is erased (sealed IS NULL).
-- The private half is sealed with SCHEDULER_SECRET_KEY (internal/secrets/seal, key_id names the
-- key that sealed it); the table never holds it in clear. public_jwk is the public half alone.
CREATE TABLE scheduler_oidc_keys (
    kid          text PRIMARY KEY,
    alg          text NOT NULL CHECK (alg IN ('ES256')),
    state        text NOT NULL CHECK (state IN ('next', 'current', 'previous', 'retired')),
    public_jwk   jsonb NOT NULL,
    key_id       text,
    sealed       bytea,
    created_at   timestamptz NOT NULL DEFAULT now(),
    -- When the key became current, then previous, then retired.
    current_at   timestamptz,
    previous_at  timestamptz,
    retired_at   timestamptz,
    CHECK ((state = 'retired') = (sealed IS NULL)),
    CHECK ((sealed IS NULL) = (key_id IS NULL))
);
-- One current key and one next key at most: two replicas creating or rotating at once meet
-- here (and on the transaction lock the code takes first), so neither can add a second.
CREATE UNIQUE INDEX scheduler_oidc_keys_one_current ON scheduler_oidc_keys (state) WHERE state = 'current';
CREATE UNIQUE INDEX scheduler_oidc_keys_one_next ON scheduler_oidc_keys (state) WHERE state = 'next';
REVOKE ALL ON scheduler_oidc_keys FROM PUBLIC;
-- Creating and rotating keys is serialised by this row (store.KnownLocks).
INSERT INTO scheduler_locks (name) VALUES ('scheduler:oidc_keys');

DO $$
DECLARE
    def text;
BEGIN
    SELECT pg_get_constraintdef(oid) INTO def FROM pg_constraint
    WHERE conrelid = 'operator_actions'::regclass AND conname = 'operator_actions_action_check';
    ALTER TABLE operator_actions DROP CONSTRAINT operator_actions_action_check;
    EXECUTE format('ALTER TABLE operator_actions ADD CONSTRAINT operator_actions_action_check CHECK (action IN (%L) OR %s)',
                   'oidc-rotate', substring(def FROM '^CHECK (.*)$'));
END $$;
