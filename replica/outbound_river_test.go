package replica_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schedulerhq/scheduler/internal/config"
)

// The attack of a hostile team's river job: insert into another team's database (its SQL
// target) under a kind and queue River would refuse. One 422 lists every problem; a team's
// own target with River's rules kept is accepted, and reads back as kind river.
func TestRiverJobRefusedWithEveryProblemListed(t *testing.T) {
	srv := outboundCluster(t, config.Runtime{})
	teama := editorOf(t, srv, "teama", `{"sql_targets": ["APP1"]}`)
	editorOf(t, srv, "teamb", `{"sql_targets": ["APP2"]}`)

	a := callAs(t, srv.URL, teama, "POST", "/v1/namespaces/teama/jobs", `{"name": "steal", "schedule": "@every 1m",
		"river": {"target": "APP2", "kind": "bad kind!", "queue": "Not A Queue", "args": "text"}}`)
	require.Equal(t, http.StatusUnprocessableEntity, a.status, "%s", a.body)
	problems := map[string]string{}
	for _, e := range a.json(t)["errors"].([]any) {
		problems[e.(map[string]any)["field"].(string)] = e.(map[string]any)["detail"].(string)
	}
	assert.Contains(t, problems["river.target"], `"APP2" is not a SQL target of namespace teama; its targets: APP1`)
	assert.Contains(t, problems["river.kind"], "is not a River job kind")
	assert.Contains(t, problems["river.queue"], "is not a River queue")
	assert.Contains(t, problems["river.args"], "must be a JSON object")
	assert.Len(t, problems, 4, "%s", a.body)

	a = callAs(t, srv.URL, teama, "POST", "/v1/namespaces/teama/jobs", `{"name": "invoices", "schedule": "@every 1m",
		"river": {"target": "app1", "kind": "send_invoice", "args": {"customer_id": 42}, "queue": "billing", "unique": true}}`)
	require.Equal(t, http.StatusCreated, a.status, "%s", a.body)
	job := must(t, srv, http.StatusOK, "GET", "/v1/namespaces/teama/jobs/invoices", "").json(t)
	assert.Equal(t, "river", job["kind"])
	assert.Equal(t, "River send_invoice on app1 (queue billing)", job["target"])
}
