-- Backfill ids are drawn at random instead of counted: with one sequence for every
-- namespace, two of a team's own backfill ids told it how many backfills the other teams
-- had asked for in between, and the next number was another team's backfill. 48 bits of
-- gen_random_uuid() (PostgreSQL's strong random source, not random()'s generator, whose
-- next output can be worked out from a few seen ones), plus one: positive and below 2^53,
-- which a client's JavaScript reads exactly. The store inserts with ON CONFLICT (id) DO
-- NOTHING and draws again in the rare case of a collision. Existing rows keep their ids;
-- the leader orders running backfills by created_at now.
CREATE FUNCTION scheduler_backfill_id() RETURNS bigint LANGUAGE sql VOLATILE
RETURN ('x' || substr(replace(gen_random_uuid()::text, '-', ''), 1, 12))::bit(48)::bigint + 1;

ALTER TABLE scheduler_backfills ALTER COLUMN id DROP IDENTITY;
ALTER TABLE scheduler_backfills ALTER COLUMN id SET DEFAULT scheduler_backfill_id();
