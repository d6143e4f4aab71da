DROP TABLE IF EXISTS member_plan_change_history;
DROP TABLE IF EXISTS members;
DROP TABLE IF EXISTS membership_plans;
DROP TABLE IF EXISTS tenants;
