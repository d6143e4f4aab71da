DROP TABLE IF EXISTS daily_rounds;
DROP FUNCTION IF EXISTS daily_rounds_guard_transition();
DROP TABLE IF EXISTS group_prompts;
DROP TABLE IF EXISTS group_settings;
DROP TABLE IF EXISTS groups;
