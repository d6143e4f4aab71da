-- status-sync walks expired ACTIVE members in id order (the table's physical order), so that
-- each batch rewrites neighbouring rows and every heap page once per run; the end date is
-- included so the scan filters on it without visiting the table.
CREATE INDEX members_active_id_idx ON members (id) INCLUDE (membership_end_date)
    WHERE status = 'ACTIVE';
DROP INDEX members_active_end_idx;
