DROP TABLE scheduler_sql_backends;
