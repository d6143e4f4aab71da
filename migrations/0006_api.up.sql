-- History pages of the HTTP API (GET /v1/jobs/{name}/runs), newest first by id, filtered by
-- status or trigger: with these a page is an index range scan from the cursor, whatever the
-- table's size, instead of a walk of the job's whole history filtering out other statuses.
CREATE INDEX job_runs_job_status_id_idx ON job_runs (job, status, id DESC);
CREATE INDEX job_runs_job_trigger_id_idx ON job_runs (job, trigger, id DESC);
