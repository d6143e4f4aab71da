package api

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schedulerhq/scheduler/internal/metrics"
	"github.com/schedulerhq/scheduler/internal/runtimejob"
	"github.com/schedulerhq/scheduler/internal/targets"
)

// newNATSAPI checks NATS URLs with the replicas' outbound guard, which allows nothing
// private (no SCHEDULER_HTTP_ALLOW).
func newNATSAPI(t *testing.T) *testAPI {
	t.Helper()
	a := newTestAPI(t)
	guard, err := targets.NewGuard(nil)
	require.NoError(t, err)
	a.server = NewServer(Config{DB: a.db.DB, InstanceID: testInstance, Jobs: testJobs(t), APIToken: testToken,
		ReadToken: testReadToken, Recorder: metrics.New(),
		Runtime: runtimejob.Env{CheckURL: guard.CheckURL, CheckNATSURL: guard.CheckNATSURL,
			Secret: func(_, name string) ([]string, bool) { _, ok := testSecrets[name]; return nil, ok }}})
	a.http.Config.Handler = a.server.Handler()
	return a
}

// A NATS job whose server is a private address the operator did not allow, whose subject
// is JetStream's API and whose URL carries a password is refused with 422 listing every
// problem, nothing stored; a good one is stored, listed under kind nats, and shown
// without its server's secret.
func TestNATSJobDefinition(t *testing.T) {
	t.Parallel()
	a := newNATSAPI(t)
	res := a.do("POST", "/v1/jobs", `{"name": "sneaky", "schedule": "@every 1m",
		"nats": {"url": "nats://10.1.2.3:4222", "subject": "$JS.API.STREAM.DELETE.ORDERS"}}`, nil)
	require.Equal(t, http.StatusUnprocessableEntity, res.Status, "body: %s", res.Body)
	fields := map[string]string{}
	for _, e := range res.JSON(t)["errors"].([]any) {
		e := e.(map[string]any)
		fields[e["field"].(string)] = e["detail"].(string)
	}
	assert.Contains(t, fields["nats.url"], "a private address; an operator can allow it with SCHEDULER_HTTP_ALLOW")
	assert.Contains(t, fields["nats.subject"], "JetStream's own API")
	res = a.do("POST", "/v1/jobs", `{"name": "leaky", "schedule": "@every 1m",
		"nats": {"url": "nats://app:hunter2@nats.example.com", "subject": "orders.daily"}}`, nil)
	require.Equal(t, http.StatusUnprocessableEntity, res.Status, "body: %s", res.Body)
	assert.NotContains(t, string(res.Body), "hunter2")
	assert.Zero(t, a.count(`SELECT count(*) FROM job_definitions`))

	res = a.do("POST", "/v1/jobs", `{"name": "orders", "schedule": "@every 1m",
		"nats": {"url_secret": "BILLING_TOKEN", "subject": "orders.daily", "body": "{}"}}`, nil)
	require.Equal(t, http.StatusCreated, res.Status, "body: %s", res.Body)
	view := res.JSON(t)
	assert.Equal(t, "nats", view["kind"])
	assert.Equal(t, "NATS publish to orders.daily on secret BILLING_TOKEN", view["target"])
	res = a.do("GET", "/v1/jobs?kind=nats", "", nil)
	require.Equal(t, http.StatusOK, res.Status, "body: %s", res.Body)
	assert.Contains(t, string(res.Body), `"name":"orders"`)
}
