DROP TABLE scheduler_identity;
