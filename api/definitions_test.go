package api

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schedulerhq/scheduler/internal/metrics"
	"github.com/schedulerhq/scheduler/internal/runtimejob"
	"github.com/schedulerhq/scheduler/internal/secrets"
	"github.com/schedulerhq/scheduler/internal/store"
	"github.com/schedulerhq/scheduler/internal/store/storetest"
)

// testSecrets plays the replica's SCHEDULER_SECRET_<NAME> variables: the API may learn that
// a secret is set, never its value.
var testSecrets = map[string]string{"BILLING_TOKEN": "s3cr3t-value"}

// dailyReport is a runtime HTTP job whose call authenticates with a secret.
const dailyReport = `{"name": "daily-report", "schedule": "0 2 * * *", "time_zone": "Europe/Paris",
	"description": "the billing report", "labels": {"team": "billing"},
	"http": {"url": "https://billing.internal/reports/daily", "headers": {"Content-Type": "application/json"},
	         "body": "{}", "auth": {"bearer_secret": "BILLING_TOKEN"}}}`

// testSQLTarget declares the SQL target APP.
func testSQLTarget(name string) error {
	if strings.EqualFold(name, "APP") {
		return nil
	}
	return fmt.Errorf("%q is not a declared SQL target; declared: APP", name)
}

// newRuntimeAPI is newTestAPI with runtime jobs configured: the test's secrets, SQL jobs
// enabled, at most maxJobs runtime jobs (0: the default), and the read-only token.
func newRuntimeAPI(t *testing.T, maxJobs int) *testAPI {
	t.Helper()
	a := newTestAPI(t)
	a.server = NewServer(Config{DB: a.db.DB, InstanceID: testInstance, Jobs: testJobs(t), APIToken: testToken,
		ReadToken: testReadToken, Recorder: metrics.New(), MaxJobs: maxJobs,
		Secrets: secrets.New(testSecrets, testSecretBox(t), a.db.DB),
		Runtime: runtimejob.Env{SQLTarget: testSQLTarget}})
	a.http.Config.Handler = a.server.Handler()
	return a
}

// auditDetails returns the audit log's definition changes, oldest first, as action and
// detail.
func (a *testAPI) auditDetails() []map[string]any {
	a.t.Helper()
	res := a.do("GET", "/v1/audit", "", nil)
	require.Equal(a.t, http.StatusOK, res.Status)
	var out []map[string]any
	actions := res.JSON(a.t)["actions"].([]any)
	for i := len(actions) - 1; i >= 0; i-- {
		act := actions[i].(map[string]any)
		switch act["action"] {
		case "create", "update", "delete":
			require.Contains(a.t, act, "detail", "a definition change carries its detail: %v", act)
			out = append(out, map[string]any{"action": act["action"], "job": act["job"], "detail": act["detail"]})
		default:
			assert.NotContains(a.t, act, "detail", "an action without a detail shows none: %v", act)
		}
	}
	return out
}

func TestCreateRuntimeJob(t *testing.T) {
	t.Parallel()
	a := newRuntimeAPI(t, 0)

	res := a.do("POST", "/v1/jobs", dailyReport, nil)
	require.Equal(t, http.StatusCreated, res.Status, "body: %s", res.Body)
	assert.Equal(t, "/v1/jobs/daily-report", res.Header.Get("Location"))
	assert.Equal(t, `"1"`, res.Header.Get("ETag"), "the version, as a strong entity tag")
	assert.Equal(t, "1", res.Header.Get("X-Job-Version"))
	job := res.JSON(t)
	assert.Equal(t, "daily-report", job["name"])
	assert.Equal(t, "http", job["kind"])
	assert.Equal(t, float64(1), job["version"])
	assert.Equal(t, "the billing report", job["description"])
	assert.Equal(t, map[string]any{"team": "billing"}, job["labels"])
	assert.Equal(t, "POST https://billing.internal/reports/daily", job["target"])
	assert.Equal(t, "skip", job["overlap"])
	assert.Equal(t, "Europe/Paris", job["time_zone"])
	assert.Equal(t, true, job["enabled"])
	assert.Equal(t, "1m0s", job["timeout"])
	assert.Len(t, job["next_runs"], nextRunsShown)
	assert.NotContains(t, job, "definition_error")
	def := job["definition"].(map[string]any)
	assert.Equal(t, "daily-report", def["name"])
	assert.Equal(t, "1m", def["timeout"], "the normal form: defaults filled in, durations short")
	assert.Equal(t, "skip", def["overlap"])
	assert.Equal(t, map[string]any{"max_attempts": float64(3), "initial_backoff": "1s", "max_backoff": "1m"}, def["retry"])
	httpDef := def["http"].(map[string]any)
	assert.Equal(t, "POST", httpDef["method"])
	assert.Equal(t, "30s", httpDef["timeout"])
	assert.Equal(t, map[string]any{"bearer_secret": "BILLING_TOKEN"}, httpDef["auth"])
	assert.Equal(t, 1, a.count(`SELECT count(*) FROM job_definitions WHERE name = 'daily-report' AND version = 1 AND kind = 'http'`))

	// GET finds it by name, names its version, and keeps the weak content ETag for 304s.
	res = a.do("GET", "/v1/jobs/daily-report", "", nil)
	require.Equal(t, http.StatusOK, res.Status)
	assert.Equal(t, job, res.JSON(t))
	assert.Equal(t, "1", res.Header.Get("X-Job-Version"))
	tag := res.Header.Get("ETag")
	require.True(t, strings.HasPrefix(tag, `W/"`), "ETag %q", tag)
	again := a.do("GET", "/v1/jobs/daily-report", "", header{"If-None-Match": tag})
	assert.Equal(t, http.StatusNotModified, again.Status)
	a.do("POST", "/v1/jobs/daily-report/pause", "", nil)
	changed := a.do("GET", "/v1/jobs/daily-report", "", header{"If-None-Match": tag})
	assert.Equal(t, http.StatusOK, changed.Status, "pausing changes the answer, not the version")
	assert.Equal(t, "1", changed.Header.Get("X-Job-Version"))

	// A name taken is a 409; nothing changes.
	res = a.do("POST", "/v1/jobs", strings.Replace(dailyReport, "0 2 * * *", "0 3 * * *", 1), nil)
	require.Equal(t, http.StatusConflict, res.Status, "body: %s", res.Body)
	assert.Equal(t, "job-exists", res.problemType(t))
	assert.Equal(t, "name", res.problemField(t))
	assert.Equal(t, 1, a.count(`SELECT count(*) FROM job_definitions WHERE definition->>'schedule' = '0 2 * * *'`))

	// The create is audited with the definition after it.
	details := a.auditDetails()
	require.Len(t, details, 1)
	assert.Equal(t, "create", details[0]["action"])
	assert.Equal(t, "daily-report", details[0]["job"])
	detail := details[0]["detail"].(map[string]any)
	assert.Nil(t, detail["before"])
	assert.Equal(t, def, detail["after"])
}

func TestInvalidDefinitionListsEveryField(t *testing.T) {
	t.Parallel()
	a := newRuntimeAPI(t, 0)
	five := `{"name": "Bad_Name", "schedule": "every tuesday", "timeout": "forever", "overlap": "sometimes",
		"http": {"method": "FETCH", "url": "https://billing.internal/x"}}`
	res := a.do("POST", "/v1/jobs", five, nil)
	require.Equal(t, http.StatusUnprocessableEntity, res.Status, "body: %s", res.Body)
	assert.Equal(t, "invalid-definition", res.problemType(t))
	body := res.JSON(t)
	assert.Equal(t, "the job definition has 5 problems; see errors", body["detail"])
	var fields []string
	for _, e := range body["errors"].([]any) {
		fields = append(fields, e.(map[string]any)["field"].(string))
		assert.NotEmpty(t, e.(map[string]any)["detail"])
	}
	assert.ElementsMatch(t, []string{"name", "schedule", "timeout", "overlap", "http.method"}, fields)

	// The same on PUT, with the body's name against the URL's counted too.
	res = a.do("PUT", "/v1/jobs/other-name", strings.Replace(five, "Bad_Name", "daily-report", 1), nil)
	require.Equal(t, http.StatusUnprocessableEntity, res.Status, "body: %s", res.Body)
	assert.Equal(t, "name", res.problemField(t), "the name mismatch comes first")
	assert.Len(t, res.JSON(t)["errors"], 5)

	for _, c := range []struct{ name, body, status, typ, field string }{
		{"malformed JSON", `{"name": `, "400", "invalid-json", ""},
		{"unknown field", `{"name": "x", "schedule": "@every 1m", "time_zon": "UTC"}`, "400", "invalid-json", "time_zon"},
		{"wrong type", `{"name": "x", "schedule": "@every 1m", "enabled": "yes"}`, "400", "invalid-json", "enabled"},
		{"empty body", ``, "400", "invalid-json", "(body)"},
		{"secret not set", `{"name": "x", "schedule": "@every 1m", "http": {"url": "https://a.example", "signing_secret": "NOT_SET"}}`, "422", "invalid-definition", "http.signing_secret"},
		{"NUL in a free text", `{"name": "x", "schedule": "@every 1m", "description": "a\u0000b", "sql": {"target": "APP", "statements": "SELECT 1"}}`, "422", "invalid-definition", "description"},
		{"a built-in job's name", `{"name": "plan-change", "schedule": "@every 1m", "sql": {"target": "APP", "statements": "SELECT 1"}}`, "422", "invalid-definition", "name"},
	} {
		res := a.do("POST", "/v1/jobs", c.body, nil)
		require.Equal(t, c.status, fmt.Sprint(res.Status), "%s: %s", c.name, res.Body)
		assert.Equal(t, c.typ, res.problemType(t), c.name)
		if c.field != "" {
			assert.Equal(t, c.field, res.problemField(t), c.name)
		}
	}
	assert.Zero(t, a.count(`SELECT count(*) FROM job_definitions`))
	assert.Zero(t, a.count(`SELECT count(*) FROM operator_actions`))
}

func TestPutRuntimeJob(t *testing.T) {
	t.Parallel()
	a := newRuntimeAPI(t, 0)
	noName := strings.Replace(dailyReport, `"name": "daily-report", `, "", 1)

	// PUT creates a missing job; the body may leave the name out.
	res := a.do("PUT", "/v1/jobs/daily-report", noName, nil)
	require.Equal(t, http.StatusCreated, res.Status, "body: %s", res.Body)
	assert.Equal(t, "/v1/jobs/daily-report", res.Header.Get("Location"))
	assert.Equal(t, `"1"`, res.Header.Get("ETag"))

	// A change with the current version: the next version.
	hourly := strings.Replace(dailyReport, "0 2 * * *", "0 * * * *", 1)
	res = a.do("PUT", "/v1/jobs/daily-report", hourly, header{"If-Match": `"1"`})
	require.Equal(t, http.StatusOK, res.Status, "body: %s", res.Body)
	assert.Equal(t, `"2"`, res.Header.Get("ETag"))
	assert.Empty(t, res.Header.Get("Location"))
	assert.Equal(t, float64(2), res.JSON(t)["version"])
	assert.Equal(t, "0 * * * *", res.JSON(t)["definition"].(map[string]any)["schedule"])

	// A stale version: 412, nothing changes.
	weekly := strings.Replace(dailyReport, "0 2 * * *", "0 2 * * 1", 1)
	res = a.do("PUT", "/v1/jobs/daily-report", weekly, header{"If-Match": `"1"`})
	require.Equal(t, http.StatusPreconditionFailed, res.Status, "body: %s", res.Body)
	assert.Equal(t, "version-mismatch", res.problemType(t))
	assert.Contains(t, res.JSON(t)["detail"], `If-Match: "2"`)
	// The weak content ETag of a GET names no version: 412 too.
	tag := a.do("GET", "/v1/jobs/daily-report", "", nil).Header.Get("ETag")
	res = a.do("PUT", "/v1/jobs/daily-report", weekly, header{"If-Match": tag})
	require.Equal(t, http.StatusPreconditionFailed, res.Status, "body: %s", res.Body)
	assert.Equal(t, 1, a.count(`SELECT count(*) FROM job_definitions WHERE version = 2 AND definition->>'schedule' = '0 * * * *'`))

	// The version bare and weak are taken as well; * is any version.
	res = a.do("PUT", "/v1/jobs/daily-report", weekly, header{"If-Match": `2`})
	require.Equal(t, http.StatusOK, res.Status, "body: %s", res.Body)
	assert.Equal(t, `"3"`, res.Header.Get("ETag"))
	res = a.do("PUT", "/v1/jobs/daily-report", dailyReport, header{"If-Match": `W/"3"`})
	require.Equal(t, http.StatusOK, res.Status, "body: %s", res.Body)
	assert.Equal(t, `"4"`, res.Header.Get("ETag"))
	res = a.do("PUT", "/v1/jobs/daily-report", hourly, header{"If-Match": `*`})
	require.Equal(t, http.StatusOK, res.Status, "body: %s", res.Body)
	assert.Equal(t, `"5"`, res.Header.Get("ETag"))
	res = a.do("PUT", "/v1/jobs/daily-report", hourly, header{"If-Match": `five`})
	require.Equal(t, http.StatusBadRequest, res.Status, "body: %s", res.Body)
	assert.Equal(t, "If-Match", res.problemField(t))

	// The same definition again: 200, the same version, no audit row.
	audited := a.count(`SELECT count(*) FROM operator_actions`)
	res = a.do("PUT", "/v1/jobs/daily-report", hourly, header{"If-Match": `"5"`})
	require.Equal(t, http.StatusOK, res.Status, "body: %s", res.Body)
	assert.Equal(t, `"5"`, res.Header.Get("ETag"))
	assert.Equal(t, float64(5), res.JSON(t)["version"])
	assert.Equal(t, audited, a.count(`SELECT count(*) FROM operator_actions`), "an unchanged PUT is not audited")

	// If-Match on a job that does not exist: 412, not a create.
	res = a.do("PUT", "/v1/jobs/nightly", noName, header{"If-Match": `"1"`})
	require.Equal(t, http.StatusPreconditionFailed, res.Status, "body: %s", res.Body)
	assert.Equal(t, "version-mismatch", res.problemType(t))
	res = a.do("PUT", "/v1/jobs/nightly", noName, header{"If-Match": `*`})
	require.Equal(t, http.StatusPreconditionFailed, res.Status, "body: %s", res.Body)
	assert.Zero(t, a.count(`SELECT count(*) FROM job_definitions WHERE name = 'nightly'`))

	// The body's name must be the URL's.
	res = a.do("PUT", "/v1/jobs/nightly", dailyReport, nil)
	require.Equal(t, http.StatusUnprocessableEntity, res.Status, "body: %s", res.Body)
	assert.Equal(t, "name", res.problemField(t))

	// The audit log has every change with the definitions before and after.
	details := a.auditDetails()
	var actions []string
	for _, d := range details {
		actions = append(actions, d["action"].(string))
	}
	assert.Equal(t, []string{"create", "update", "update", "update", "update"}, actions)
	first := details[1]["detail"].(map[string]any)
	assert.Equal(t, "0 2 * * *", first["before"].(map[string]any)["schedule"])
	assert.Equal(t, "0 * * * *", first["after"].(map[string]any)["schedule"])
}

func TestBuiltinJobsRefuseDefinitionChanges(t *testing.T) {
	t.Parallel()
	a := newRuntimeAPI(t, 0)
	body := `{"schedule": "@every 1m", "sql": {"target": "APP", "statements": "SELECT 1"}}`
	res := a.do("PUT", "/v1/jobs/plan-change", body, nil)
	require.Equal(t, http.StatusConflict, res.Status, "body: %s", res.Body)
	assert.Equal(t, "builtin-job", res.problemType(t))
	assert.Contains(t, res.JSON(t)["detail"], "SCHEDULER_JOB_PLAN_CHANGE_*")
	res = a.do("DELETE", "/v1/jobs/plan-change", "", nil)
	require.Equal(t, http.StatusConflict, res.Status, "body: %s", res.Body)
	assert.Equal(t, "builtin-job", res.problemType(t))

	res = a.do("GET", "/v1/jobs/plan-change", "", nil)
	require.Equal(t, http.StatusOK, res.Status)
	assert.Equal(t, "builtin", res.JSON(t)["kind"])
	assert.NotContains(t, res.JSON(t), "version")
	assert.NotContains(t, res.JSON(t), "definition")
	assert.Empty(t, res.Header.Get("X-Job-Version"))
	assert.Zero(t, a.count(`SELECT count(*) FROM operator_actions`))
}

func TestDeleteRuntimeJobKeepsItsHistory(t *testing.T) {
	t.Parallel()
	a := newRuntimeAPI(t, 0)
	res := a.do("POST", "/v1/jobs", dailyReport, nil)
	require.Equal(t, http.StatusCreated, res.Status, "body: %s", res.Body)
	def := res.JSON(t)["definition"]
	res = a.do("POST", "/v1/jobs/daily-report/runs", "", nil)
	require.Equal(t, http.StatusAccepted, res.Status, "body: %s", res.Body)
	runPath := res.Header.Get("Location")
	a.exec(`UPDATE job_runs SET status = 'succeeded', started_at = now(), finished_at = now(), definition_version = 1`)
	res = a.do("POST", "/v1/jobs/daily-report/pause", "", nil)
	require.Equal(t, http.StatusOK, res.Status, "body: %s", res.Body)

	res = a.do("DELETE", "/v1/jobs/daily-report", "", header{"If-Match": `"7"`})
	require.Equal(t, http.StatusPreconditionFailed, res.Status, "body: %s", res.Body)
	assert.Equal(t, "version-mismatch", res.problemType(t))

	res = a.do("DELETE", "/v1/jobs/daily-report", "", header{"If-Match": `"1"`})
	require.Equal(t, http.StatusNoContent, res.Status, "body: %s", res.Body)
	assert.Empty(t, res.Body)
	res = a.do("GET", "/v1/jobs/daily-report", "", nil)
	assert.Equal(t, http.StatusNotFound, res.Status)
	assert.Equal(t, "job-not-found", res.problemType(t))
	res = a.do("DELETE", "/v1/jobs/daily-report", "", nil)
	assert.Equal(t, http.StatusNotFound, res.Status)
	res = a.do("DELETE", "/v1/jobs/No_Such", "", nil)
	assert.Equal(t, http.StatusNotFound, res.Status)

	// Its runs stay: by id, and listed under its name.
	res = a.do("GET", runPath, "", nil)
	require.Equal(t, http.StatusOK, res.Status)
	assert.Equal(t, "daily-report", res.JSON(t)["job"])
	assert.Equal(t, float64(1), res.JSON(t)["definition_version"])
	res = a.do("GET", "/v1/jobs/daily-report/runs", "", nil)
	require.Equal(t, http.StatusOK, res.Status, "body: %s", res.Body)
	assert.Len(t, res.JSON(t)["runs"], 1)
	res = a.do("GET", "/v1/jobs/never-was/runs", "", nil)
	assert.Equal(t, http.StatusNotFound, res.Status, "a name no job and no run has")

	// The delete is audited with the definition before it.
	details := a.auditDetails()
	require.Len(t, details, 2)
	assert.Equal(t, "delete", details[1]["action"])
	assert.Equal(t, def, details[1]["detail"].(map[string]any)["before"])
	assert.Nil(t, details[1]["detail"].(map[string]any)["after"])

	// A job defined again under the name starts unpaused, at version 1, with the history.
	res = a.do("POST", "/v1/jobs", dailyReport, nil)
	require.Equal(t, http.StatusCreated, res.Status, "body: %s", res.Body)
	job := res.JSON(t)
	assert.Equal(t, false, job["paused"])
	assert.Equal(t, float64(1), job["version"])
	assert.NotNil(t, job["last_run"])
}

func TestDryRunStoresNothing(t *testing.T) {
	t.Parallel()
	a := newRuntimeAPI(t, 0)
	res := a.do("POST", "/v1/jobs?dry_run=true", dailyReport, nil)
	require.Equal(t, http.StatusOK, res.Status, "body: %s", res.Body)
	preview := res.JSON(t)
	assert.Equal(t, float64(1), preview["version"])
	assert.Len(t, preview["next_runs"], nextRunsShown)
	assert.Empty(t, res.Header.Get("ETag"), "nothing stored, no version to name")
	assert.Empty(t, res.Header.Get("Location"))
	assert.Zero(t, a.count(`SELECT count(*) FROM job_definitions`))
	assert.Zero(t, a.count(`SELECT count(*) FROM operator_actions`))

	res = a.do("PUT", "/v1/jobs/daily-report?dry_run=1", dailyReport, nil)
	require.Equal(t, http.StatusOK, res.Status, "body: %s", res.Body)
	assert.Equal(t, float64(1), res.JSON(t)["version"])
	res = a.do("PUT", "/v1/jobs/daily-report?dry_run=true", dailyReport, header{"If-Match": `"1"`})
	require.Equal(t, http.StatusPreconditionFailed, res.Status, "body: %s", res.Body)

	// On a stored job: the version it would get, and the conditions the PUT would check.
	res = a.do("POST", "/v1/jobs", dailyReport, nil)
	require.Equal(t, http.StatusCreated, res.Status, "body: %s", res.Body)
	created := res.JSON(t)
	res = a.do("POST", "/v1/jobs?dry_run=true", dailyReport, nil)
	require.Equal(t, http.StatusConflict, res.Status, "body: %s", res.Body)
	assert.Equal(t, "job-exists", res.problemType(t))
	res = a.do("PUT", "/v1/jobs/daily-report?dry_run=true", dailyReport, nil)
	require.Equal(t, http.StatusOK, res.Status, "body: %s", res.Body)
	assert.Equal(t, created, res.JSON(t), "the same definition keeps its version")
	hourly := strings.Replace(dailyReport, "0 2 * * *", "0 * * * *", 1)
	res = a.do("PUT", "/v1/jobs/daily-report?dry_run=true", hourly, header{"If-Match": `"1"`})
	require.Equal(t, http.StatusOK, res.Status, "body: %s", res.Body)
	assert.Equal(t, float64(2), res.JSON(t)["version"])
	assert.Equal(t, "0 * * * *", res.JSON(t)["definition"].(map[string]any)["schedule"])
	res = a.do("PUT", "/v1/jobs/daily-report?dry_run=true", hourly, header{"If-Match": `"2"`})
	require.Equal(t, http.StatusPreconditionFailed, res.Status, "body: %s", res.Body)
	res = a.do("PUT", "/v1/jobs/daily-report?dry_run=maybe", hourly, nil)
	require.Equal(t, http.StatusBadRequest, res.Status, "body: %s", res.Body)
	assert.Equal(t, "dry_run", res.problemField(t))

	assert.Equal(t, 1, a.count(`SELECT count(*) FROM job_definitions WHERE version = 1 AND definition->>'schedule' = '0 2 * * *'`))
	assert.Equal(t, 1, a.count(`SELECT count(*) FROM operator_actions`), "the create alone")
}

func TestReadTokenCannotDefineJobs(t *testing.T) {
	t.Parallel()
	a := newRuntimeAPI(t, 0)
	require.Equal(t, http.StatusCreated, a.do("POST", "/v1/jobs", dailyReport, nil).Status)
	read := header{"Authorization": "Bearer " + testReadToken}
	for _, c := range [][3]string{
		{"POST", "/v1/jobs", strings.Replace(dailyReport, "daily-report", "other", 1)},
		{"PUT", "/v1/jobs/daily-report", dailyReport},
		{"DELETE", "/v1/jobs/daily-report", ""},
	} {
		res := a.do(c[0], c[1], c[2], read)
		require.Equal(t, http.StatusForbidden, res.Status, "%s %s: %s", c[0], c[1], res.Body)
		assert.Equal(t, "read-only-token", res.problemType(t))
	}
	res := a.do("GET", "/v1/jobs/daily-report", "", read)
	assert.Equal(t, http.StatusOK, res.Status, "the read-only token reads runtime jobs")
	assert.Equal(t, 1, a.count(`SELECT count(*) FROM job_definitions WHERE version = 1`))
	assert.Equal(t, 3, a.count(`SELECT count(*) FROM operator_actions WHERE action = 'refused' AND token_kind = 'read'`))
}

func TestTooManyJobs(t *testing.T) {
	t.Parallel()
	a := newRuntimeAPI(t, 1)
	require.Equal(t, http.StatusCreated, a.do("POST", "/v1/jobs", dailyReport, nil).Status)
	res := a.do("POST", "/v1/jobs", strings.Replace(dailyReport, "daily-report", "second", 1), nil)
	require.Equal(t, http.StatusConflict, res.Status, "body: %s", res.Body)
	assert.Equal(t, "too-many-jobs", res.problemType(t))
	assert.Contains(t, res.JSON(t)["detail"], "SCHEDULER_MAX_JOBS")
	res = a.do("PUT", "/v1/jobs/second", strings.Replace(dailyReport, "daily-report", "second", 1), nil)
	require.Equal(t, http.StatusConflict, res.Status, "body: %s", res.Body)
	assert.Equal(t, "too-many-jobs", res.problemType(t))
	// Replacing the one job is no new job.
	res = a.do("PUT", "/v1/jobs/daily-report", strings.Replace(dailyReport, "0 2 * * *", "0 3 * * *", 1), nil)
	require.Equal(t, http.StatusOK, res.Status, "body: %s", res.Body)
	assert.Equal(t, 1, a.count(`SELECT count(*) FROM job_definitions`))
}

func TestJobsListBuiltinThenRuntime(t *testing.T) {
	t.Parallel()
	a := newRuntimeAPI(t, 0)
	statements := "REFRESH MATERIALIZED VIEW daily_totals;\n\n    REFRESH MATERIALIZED VIEW monthly_totals_by_customer_and_region;"
	sqlJob, _ := json.Marshal(map[string]any{"name": "a-refresh", "schedule": "@every 10m", "enabled": false,
		"overlap": "queue-one", "sql": map[string]string{"target": "APP", "statements": statements}})
	require.Equal(t, http.StatusCreated, a.do("POST", "/v1/jobs", strings.Replace(dailyReport, "daily-report", "b-report", 1), nil).Status)
	res := a.do("POST", "/v1/jobs", string(sqlJob), nil)
	require.Equal(t, http.StatusCreated, res.Status, "body: %s", res.Body)

	res = a.do("GET", "/v1/jobs", "", nil)
	require.Equal(t, http.StatusOK, res.Status)
	var names, kinds []string
	jobs := res.JSON(t)["jobs"].([]any)
	for _, j := range jobs {
		names = append(names, j.(map[string]any)["name"].(string))
		kinds = append(kinds, j.(map[string]any)["kind"].(string))
	}
	assert.Equal(t, []string{"rounds-create", "plan-change", "status-sync", "a-refresh", "b-report"}, names)
	assert.Equal(t, []string{"builtin", "builtin", "builtin", "sql", "http"}, kinds)

	refresh := jobs[3].(map[string]any)
	target := refresh["target"].(string)
	assert.True(t, strings.HasPrefix(target, "SQL on APP: REFRESH MATERIALIZED VIEW daily_totals; REFRESH"), "one line: %q", target)
	assert.LessOrEqual(t, len([]rune(target)), 80)
	assert.True(t, strings.HasSuffix(target, "…"), "cut: %q", target)
	assert.Equal(t, "queue-one", refresh["overlap"])
	assert.Equal(t, false, refresh["enabled"])
	assert.Empty(t, refresh["next_runs"], "a disabled job has no next runs")
	assert.Equal(t, map[string]any{}, refresh["labels"])
	assert.Equal(t, "", refresh["description"])
	assert.Equal(t, statements, refresh["definition"].(map[string]any)["sql"].(map[string]any)["statements"])

	// A disabled runtime job is not triggered, as a disabled built-in one is not.
	res = a.do("POST", "/v1/jobs/a-refresh/runs", "", nil)
	require.Equal(t, http.StatusConflict, res.Status, "body: %s", res.Body)
	assert.Equal(t, "job-disabled", res.problemType(t))
	assert.Contains(t, res.JSON(t)["detail"], `"enabled": false`)
}

func TestRuntimeJobRoutesByName(t *testing.T) {
	t.Parallel()
	a := newRuntimeAPI(t, 0)
	require.Equal(t, http.StatusCreated, a.do("POST", "/v1/jobs", dailyReport, nil).Status)

	res := a.do("POST", "/v1/jobs/daily-report/runs", `{"reason": "try it"}`, nil)
	require.Equal(t, http.StatusAccepted, res.Status, "body: %s", res.Body)
	assert.Equal(t, "daily-report", res.JSON(t)["job"])
	res = a.do("GET", "/v1/jobs/daily-report/runs", "", nil)
	require.Equal(t, http.StatusOK, res.Status)
	assert.Len(t, res.JSON(t)["runs"], 1)

	res = a.do("POST", "/v1/jobs/daily-report/pause", "", nil)
	require.Equal(t, http.StatusOK, res.Status, "body: %s", res.Body)
	assert.Equal(t, true, res.JSON(t)["paused"])
	assert.Equal(t, "http", res.JSON(t)["kind"])
	assert.Equal(t, "1", res.Header.Get("X-Job-Version"))
	res = a.do("POST", "/v1/jobs/daily-report/resume", "", nil)
	require.Equal(t, http.StatusOK, res.Status, "body: %s", res.Body)
	assert.Equal(t, false, res.JSON(t)["paused"])
	assert.Equal(t, 1, a.count(`SELECT count(*) FROM job_settings WHERE job = 'daily-report' AND NOT paused`))
}

func TestGetRunShowsAttempts(t *testing.T) {
	t.Parallel()
	a := newRuntimeAPI(t, 0)
	id := a.insertRun(storetest.RunOpts{Job: "daily-report", Status: store.StatusSucceeded,
		StartedAt: time.Date(2025, 1, 1, 2, 0, 0, 0, time.UTC), FinishedAt: time.Date(2025, 1, 1, 2, 0, 5, 0, time.UTC),
		DefinitionVersion: 3})
	a.exec(`INSERT INTO run_attempts (run_id, attempt, started_at, duration_ms, status_code, body, error)
		VALUES ($1, 2, '2025-01-01T02:00:03Z', 40, 200, 'ok', NULL),
		       ($1, 1, '2025-01-01T02:00:00Z', 2000, NULL, NULL, 'connection refused')`, id)
	res := a.do("GET", fmt.Sprintf("/v1/runs/%d", id), "", nil)
	require.Equal(t, http.StatusOK, res.Status, "body: %s", res.Body)
	run := res.JSON(t)
	assert.Equal(t, float64(3), run["definition_version"])
	assert.Equal(t, []any{
		map[string]any{"attempt": float64(1), "started_at": "2025-01-01T02:00:00Z", "duration_ms": float64(2000),
			"status_code": nil, "body": nil, "error": "connection refused"},
		map[string]any{"attempt": float64(2), "started_at": "2025-01-01T02:00:03Z", "duration_ms": float64(40),
			"status_code": float64(200), "body": "ok", "error": nil},
	}, run["attempts"])

	// Lists of runs leave the attempts out.
	res = a.do("GET", "/v1/jobs/daily-report/runs", "", nil)
	require.Equal(t, http.StatusOK, res.Status, "body: %s", res.Body)
	assert.NotContains(t, res.JSON(t)["runs"].([]any)[0], "attempts")
}

// A definition names its secrets; their values are the replicas' alone. No answer shows
// one: not the create, the job, the list, the audit log nor the run.
func TestSecretValuesAppearInNoAnswer(t *testing.T) {
	t.Parallel()
	a := newRuntimeAPI(t, 0)
	value := testSecrets["BILLING_TOKEN"]
	var answers []response
	res := a.do("POST", "/v1/jobs", dailyReport, nil)
	require.Equal(t, http.StatusCreated, res.Status, "body: %s", res.Body)
	answers = append(answers, res)
	res = a.do("POST", "/v1/jobs/daily-report/runs", "", nil)
	require.Equal(t, http.StatusAccepted, res.Status, "body: %s", res.Body)
	answers = append(answers, res)
	runPath := res.Header.Get("Location")
	for _, path := range []string{"/v1/jobs/daily-report", "/v1/jobs", "/v1/audit", runPath, "/v1/jobs/daily-report/runs"} {
		res := a.do("GET", path, "", nil)
		require.Equal(t, http.StatusOK, res.Status, "GET %s: %s", path, res.Body)
		answers = append(answers, res)
	}
	res = a.do("PUT", "/v1/jobs/daily-report?dry_run=true", strings.Replace(dailyReport, "0 2 * * *", "0 3 * * *", 1), nil)
	require.Equal(t, http.StatusOK, res.Status, "body: %s", res.Body)
	answers = append(answers, res)
	res = a.do("DELETE", "/v1/jobs/daily-report", "", nil)
	require.Equal(t, http.StatusNoContent, res.Status)
	answers = append(answers, res, a.do("GET", "/v1/audit", "", nil))

	for _, res := range answers {
		assert.NotContains(t, string(res.Body), value)
		for name, values := range res.Header {
			assert.NotContains(t, strings.Join(values, " "), value, "header %s", name)
		}
	}
	assert.Contains(t, string(answers[2].Body), "BILLING_TOKEN", "the definition names its secret")
}

// A definition's HTTP body and SQL statements may each be 64 KiB, which JSON escaping
// grows: the definition routes take 256 KiB, every other route keeps 64 KiB.
func TestDefinitionBodyLimit(t *testing.T) {
	t.Parallel()
	a := newRuntimeAPI(t, 0)
	quoted, _ := json.Marshal(strings.Repeat(`"`, runtimejob.MaxBody)) // 64 KiB that escape to 128 KiB
	big := `{"name": "big", "schedule": "@every 1h", "http": {"url": "https://a.example", "body": ` + string(quoted) + `}}`
	require.Greater(t, len(big), maxBodyBytes)
	res := a.do("POST", "/v1/jobs", big, nil)
	require.Equal(t, http.StatusCreated, res.Status, "body: %.300s", res.Body)
	res = a.do("PUT", "/v1/jobs/big", big, nil)
	require.Equal(t, http.StatusOK, res.Status, "body: %.300s", res.Body)

	huge := `{"name": "huge", "description": "` + strings.Repeat("x", maxDefinitionBytes) + `"}`
	res = a.do("POST", "/v1/jobs", huge, nil)
	require.Equal(t, http.StatusRequestEntityTooLarge, res.Status)
	assert.Equal(t, "body-too-large", res.problemType(t))
	res = a.do("POST", "/v1/jobs/big/runs", `{"reason": "`+strings.Repeat("x", maxBodyBytes)+`"}`, nil)
	require.Equal(t, http.StatusRequestEntityTooLarge, res.Status, "other routes keep 64 KiB")
}

// GET /v1/jobs?limit pages through the built-in jobs, then the runtime jobs by name: the
// pages together are the whole list, whatever the page size, and a bad limit or cursor is
// a 400 naming the field.
func TestJobListPages(t *testing.T) {
	t.Parallel()
	a := newRuntimeAPI(t, 0)
	for _, name := range []string{"report-c", "report-a", "report-b", "report-e", "report-d"} {
		res := a.do("POST", "/v1/jobs", fmt.Sprintf(`{"name": %q, "schedule": "0 2 * * *", "http": {"url": "https://billing.internal/%s"}}`, name, name), nil)
		require.Equal(t, http.StatusCreated, res.Status, string(res.Body))
	}
	names := func(res response) []string {
		var out []string
		for _, j := range res.JSON(t)["jobs"].([]any) {
			out = append(out, j.(map[string]any)["name"].(string))
		}
		return out
	}
	all := a.do("GET", "/v1/jobs", "", nil)
	require.Equal(t, http.StatusOK, all.Status)
	want := names(all)
	assert.Nil(t, all.JSON(t)["next_cursor"], "the default page holds them all")
	builtins := len(testJobs(t))
	require.Len(t, want, builtins+5)
	assert.Equal(t, []string{"report-a", "report-b", "report-c", "report-d", "report-e"}, want[builtins:])

	for _, limit := range []int{1, 2, builtins, builtins + 1, builtins + 5, 500} {
		var got []string
		pages := 0
		for path := fmt.Sprintf("/v1/jobs?limit=%d", limit); ; pages++ {
			require.Less(t, pages, len(want)+1, "limit %d: the pages never end", limit)
			res := a.do("GET", path, "", nil)
			require.Equal(t, http.StatusOK, res.Status, string(res.Body))
			page := names(res)
			assert.LessOrEqual(t, len(page), limit)
			got = append(got, page...)
			next, _ := res.JSON(t)["next_cursor"].(string)
			if next == "" {
				break
			}
			path = fmt.Sprintf("/v1/jobs?limit=%d&cursor=%s", limit, next)
		}
		assert.Equal(t, want, got, "limit %d", limit)
	}

	for path, field := range map[string]string{
		"/v1/jobs?limit=0":          "limit",
		"/v1/jobs?limit=501":        "limit",
		"/v1/jobs?limit=ten":        "limit",
		"/v1/jobs?cursor=not-a-cur": "cursor",
	} {
		res := a.do("GET", path, "", nil)
		assert.Equal(t, http.StatusBadRequest, res.Status, path)
		assert.Equal(t, field, res.problemField(t), path)
	}
}

// Without ?limit, GET /v1/jobs answers a page of jobListDefault jobs and a cursor, not every
// job: a namespace of thousands of jobs is never one answer of megabytes.
func TestJobListHasADefaultPage(t *testing.T) {
	t.Parallel()
	a := newRuntimeAPI(t, 0)
	const runtime = jobListDefault + 20
	a.exec(`INSERT INTO job_definitions (name, kind, definition)
		SELECT format('job-%s', lpad(i::text, 4, '0')), 'http', jsonb_build_object(
			'name', format('job-%s', lpad(i::text, 4, '0')), 'schedule', '0 2 * * *',
			'http', jsonb_build_object('url', format('https://receiver.internal/jobs/%s', i)))
		FROM generate_series(1, $1) AS i`, runtime)
	seen := 0
	path := "/v1/jobs"
	for pages := 0; ; pages++ {
		require.Less(t, pages, 3, "the pages never end")
		res := a.do("GET", path, "", nil)
		require.Equal(t, http.StatusOK, res.Status, string(res.Body))
		jobs := res.JSON(t)["jobs"].([]any)
		next, _ := res.JSON(t)["next_cursor"].(string)
		if pages == 0 {
			assert.Equal(t, jobListDefault, len(jobs), "the first page")
			require.NotEmpty(t, next, "a cursor to the rest")
		}
		seen += len(jobs)
		if next == "" {
			break
		}
		path = "/v1/jobs?cursor=" + next
	}
	assert.Equal(t, len(testJobs(t))+runtime, seen, "the pages hold every job once")
}
