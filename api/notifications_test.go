package api

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schedulerhq/scheduler/internal/config"
	"github.com/schedulerhq/scheduler/internal/metrics"
	"github.com/schedulerhq/scheduler/internal/notify"
	"github.com/schedulerhq/scheduler/internal/runtimejob"
	"github.com/schedulerhq/scheduler/internal/store"
	"github.com/schedulerhq/scheduler/internal/store/storetest"
	"github.com/schedulerhq/scheduler/internal/targets"
)

// newNotifyAPI is newRuntimeAPI with the replicas' outbound guard, which allows nothing
// private (no SCHEDULER_HTTP_ALLOW).
func newNotifyAPI(t *testing.T) *testAPI {
	t.Helper()
	a := newTestAPI(t)
	guard, err := targets.NewGuard(nil)
	require.NoError(t, err)
	a.server = NewServer(Config{DB: a.db.DB, InstanceID: testInstance, Jobs: notifyJobs(t), APIToken: testToken,
		ReadToken: testReadToken, Recorder: metrics.New(),
		Runtime: runtimejob.Env{CheckURL: guard.CheckURL,
			Secret: func(_, name string) ([]string, bool) { _, ok := testSecrets[name]; return nil, ok }}})
	a.http.Config.Handler = a.server.Handler()
	return a
}

// notifyJobs are testJobs with plan-change notifying a webhook of its pauses.
func notifyJobs(t *testing.T) []config.Job {
	jobs := testJobs(t)
	jobs[1].Notify = []notify.Rule{{On: []string{notify.Paused}, Webhook: &notify.Webhook{URL: "https://alerts.example.com/ops"}}}
	return jobs
}

// An operator's pause of a job whose rules want it is an event, written with the pause and
// its audit row; the built-in job's view shows its rules.
func TestPauseIsNotified(t *testing.T) {
	t.Parallel()
	a := newNotifyAPI(t)
	res := a.do("POST", "/v1/jobs/plan-change/pause", `{"reason": "incident 42"}`, nil)
	require.Equal(t, http.StatusOK, res.Status, "body: %s", res.Body)
	assert.Equal(t, 1, a.count(`SELECT count(*) FROM scheduler_notifications WHERE job = 'plan-change' AND event = 'paused' AND run_id IS NULL AND detail LIKE '%incident 42'`))
	rules := res.JSON(t)["notify"].([]any)
	require.Len(t, rules, 1)
	res = a.do("POST", "/v1/jobs/rounds-create/pause", "", nil)
	require.Equal(t, http.StatusOK, res.Status)
	assert.Zero(t, a.count(`SELECT count(*) FROM scheduler_notifications WHERE job = 'rounds-create'`), "a job without rules makes no event")
}

// A notification URL on a private address that SCHEDULER_HTTP_ALLOW does not name is
// refused when the definition is written (422), beside every other wrong notify field.
func TestNotifyToAPrivateAddressIsRefused(t *testing.T) {
	t.Parallel()
	a := newNotifyAPI(t)
	res := a.do("POST", "/v1/jobs", `{"name": "sneaky", "schedule": "0 2 * * *", "http": {"url": "https://billing.example.com/x"},
		"notify": [{"on": ["failed"], "webhook": {"url": "http://10.1.2.3/hook"}},
		           {"on": ["exploded"], "slack": {"url_secret": "NOT_SET"}},
		           {"on": ["failed"], "webhook": {"url": "http://169.254.169.254/latest"}}]}`, nil)
	require.Equal(t, http.StatusUnprocessableEntity, res.Status, "body: %s", res.Body)
	fields := map[string]string{}
	for _, e := range res.JSON(t)["errors"].([]any) {
		e := e.(map[string]any)
		fields[e["field"].(string)] = e["detail"].(string)
	}
	assert.Contains(t, fields["notify[0].webhook.url"], "SCHEDULER_HTTP_ALLOW")
	assert.Contains(t, fields["notify[1].on[0]"], "not an event")
	assert.Contains(t, fields["notify[1].slack.url_secret"], "SCHEDULER_SECRET_NOT_SET")
	assert.Contains(t, fields["notify[2].webhook.url"], "metadata")
	assert.Zero(t, a.count(`SELECT count(*) FROM job_definitions`))

	six := `{"on": ["failed"], "webhook": {"url": "https://alerts.example.com/hook"}}`
	res = a.do("POST", "/v1/jobs", `{"name": "chatty", "schedule": "0 2 * * *", "http": {"url": "https://billing.example.com/x"},
		"notify": [`+six+`,`+six+`,`+six+`,`+six+`,`+six+`,`+six+`]}`, nil)
	require.Equal(t, http.StatusUnprocessableEntity, res.Status, "body: %s", res.Body)
	assert.Equal(t, "notify", res.problemField(t))
}

// The job view shows its notify settings, and GET …/notifications lists its messages newest
// first with the events still waiting, in namespace default and in another.
func TestListNotifications(t *testing.T) {
	t.Parallel()
	a := newNotifyAPI(t)
	body := `{"name": "nightly", "schedule": "0 2 * * *", "http": {"url": "https://billing.example.com/x"},
		"notify": [{"on": ["failed", "recovered"], "webhook": {"url": "https://alerts.example.com/hook?token=abc", "signing_secret": "BILLING_TOKEN"}}]}`
	res := a.do("POST", "/v1/jobs", body, nil)
	require.Equal(t, http.StatusCreated, res.Status, "body: %s", res.Body)
	def := res.JSON(t)["definition"].(map[string]any)
	require.Contains(t, def, "notify")

	run := a.insertRun(storetest.RunOpts{Job: "nightly", Status: store.StatusFailed, Error: "boom", FinishedAt: time.Now()})
	a.exec(`INSERT INTO scheduler_notification_deliveries (job, event, kind, url, secret, run_ids, count, body, status, attempts, last_status, last_error)
		VALUES ('nightly', 'failed', 'webhook', 'https://alerts.example.com/hook?token=abc', 'BILLING_TOKEN', ARRAY[$1::bigint], 1, '{}', 'pending', 1, 503, 'status 503 is not a success status')`, run)
	a.exec(`INSERT INTO scheduler_notification_deliveries (job, event, kind, secret, run_ids, count, body, status, attempts, last_status, sent_at)
		VALUES ('nightly', 'recovered', 'slack', 'TEAM_SLACK', ARRAY[$1::bigint], 1, '{}', 'sent', 1, 200, now())`, run)
	a.exec(`INSERT INTO scheduler_notifications (job, event, run_id, status) VALUES ('nightly', 'failed', $1, 'failed')`, run)

	res = a.do("GET", "/v1/jobs/nightly/notifications", "", nil)
	require.Equal(t, http.StatusOK, res.Status, "body: %s", res.Body)
	got := res.JSON(t)
	list := got["notifications"].([]any)
	require.Len(t, list, 2)
	newest, oldest := list[0].(map[string]any), list[1].(map[string]any)
	assert.Equal(t, "job.recovered", newest["type"])
	assert.Equal(t, "slack:TEAM_SLACK", newest["destination"], "a Slack URL is a secret: only its name is shown")
	assert.Equal(t, "sent", newest["status"])
	assert.Equal(t, "pending", oldest["status"])
	assert.Equal(t, "https://alerts.example.com/hook?token=REDACTED", oldest["destination"])
	assert.Equal(t, []any{float64(run)}, oldest["runs"])
	assert.NotEmpty(t, oldest["webhook_id"])
	assert.Len(t, got["waiting"].([]any), 1)

	res = a.do("GET", "/v1/jobs/nightly/notifications?limit=1", "", nil)
	require.Equal(t, http.StatusOK, res.Status)
	assert.Len(t, res.JSON(t)["notifications"].([]any), 1)
	res = a.do("GET", "/v1/jobs/nobody/notifications", "", nil)
	assert.Equal(t, http.StatusNotFound, res.Status)

	// The namespaced twin.
	storetest.Namespace(context.Background(), t, a.db.Pool, storetest.NamespaceOpts{Name: "billing"})
	res = a.do("POST", "/v1/namespaces/billing/jobs", body, nil)
	require.Equal(t, http.StatusCreated, res.Status, "body: %s", res.Body)
	res = a.do("GET", "/v1/namespaces/billing/jobs/nightly/notifications", "", nil)
	require.Equal(t, http.StatusOK, res.Status, "body: %s", res.Body)
	assert.Equal(t, "billing", res.JSON(t)["namespace"])
	assert.Empty(t, res.JSON(t)["notifications"])
}
