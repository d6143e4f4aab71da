package engine

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Two namespaces may each have a job of the same name: each runs as its own job, under its
// key ("<namespace>/<name>"), calls its own target, and records its own runs.
func TestSameNameInTwoNamespacesIsTwoJobs(t *testing.T) {
	db, url := newDB(t)
	var billingCalls, opsCalls atomic.Int64
	billing := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { billingCalls.Add(1) }))
	t.Cleanup(billing.Close)
	ops := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { opsCalls.Add(1) }))
	t.Cleanup(ops.Close)
	_, err := db.Pool.Exec(context.Background(), `INSERT INTO scheduler_namespaces (name) VALUES ('billing'), ('ops')`)
	require.NoError(t, err)
	for ns, srv := range map[string]*httptest.Server{"billing": billing, "ops": ops} {
		j := checkDefinition(t, `{"name": "hook", "namespace": "`+ns+`", "schedule": "@every 1s", "http": {"url": "`+srv.URL+`"}}`)
		b, err := json.Marshal(j.Def)
		require.NoError(t, err)
		_, err = db.CreateDefinition(context.Background(), j.Def.Key(), j.Def.Kind(), b, 10_000)
		require.NoError(t, err)
	}
	n := startNode(t, url, "a", nodeOptions{runtime: runtimeFor(t, "127.0.0.1/32")})
	awaitSignal(t, &n.en.testSignals.leading, "leading")

	require.Eventually(t, func() bool {
		return count(t, db, `SELECT count(*) FROM job_runs WHERE job = 'billing/hook' AND status = 'succeeded'`) >= 2 &&
			count(t, db, `SELECT count(*) FROM job_runs WHERE job = 'ops/hook' AND status = 'succeeded'`) >= 2
	}, waitTimeout, 20*time.Millisecond, "both namespaces' jobs run")
	assert.Zero(t, count(t, db, `SELECT count(*) FROM job_runs WHERE job = 'hook'`), "no run under the bare name")
	assert.GreaterOrEqual(t, billingCalls.Load(), int64(2))
	assert.GreaterOrEqual(t, opsCalls.Load(), int64(2))
}
