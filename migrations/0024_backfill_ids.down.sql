-- Back to counted ids, starting above every id in use.
ALTER TABLE scheduler_backfills ALTER COLUMN id DROP DEFAULT;
DO $$
BEGIN
    EXECUTE format('ALTER TABLE scheduler_backfills ALTER COLUMN id ADD GENERATED ALWAYS AS IDENTITY (START WITH %s)',
                   coalesce((SELECT max(id) FROM scheduler_backfills), 0) + 1);
END $$;
DROP FUNCTION scheduler_backfill_id();
