DROP INDEX IF EXISTS message_deliveries_no_show_rate_key;
DROP INDEX IF EXISTS message_deliveries_appointment_kind_key;
DROP TABLE IF EXISTS appointments;
DROP TABLE IF EXISTS organizations;
