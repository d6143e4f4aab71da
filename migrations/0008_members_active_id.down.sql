CREATE INDEX members_active_end_idx ON members (membership_end_date, id)
    WHERE status = 'ACTIVE';
DROP INDEX members_active_id_idx;
