package api

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schedulerhq/scheduler/internal/store"
	"github.com/schedulerhq/scheduler/internal/store/storetest"
)

// Without a token a replica listens on loopback only, and the cross-origin check cannot stop
// a DNS-rebinding page (it is same-origin to the browser): the Host it sends can. Every
// route refuses a Host that is not loopback, localhost or configured, before acting.
func TestWithoutATokenOnlyLoopbackHostsAreAnswered(t *testing.T) {
	t.Parallel()
	a := newTestAPI(t)
	open := NewServer(Config{DB: a.db.DB, InstanceID: testInstance, Jobs: testJobs(t), APIHosts: []string{"dev-box"}})
	a.http.Config.Handler = open.Handler()
	noToken := func(host string) header { return header{"Authorization": "", "Host": host} }

	res := a.do("POST", "/v1/jobs/plan-change/pause", "", noToken("rebind.evil.example:8080"))
	require.Equal(t, http.StatusForbidden, res.Status, "body: %s", res.Body)
	assert.Equal(t, "host-not-allowed", res.problemType(t))
	assert.Equal(t, 0, countRows(t, a, `SELECT count(*) FROM job_settings WHERE paused`), "nothing was paused")
	req, err := http.NewRequest("GET", a.http.URL+"/healthz", nil)
	require.NoError(t, err)
	req.Host = "rebind.evil.example"
	raw, err := a.http.Client().Do(req)
	require.NoError(t, err)
	raw.Body.Close()
	assert.Equal(t, http.StatusForbidden, raw.StatusCode, "every route, not only /v1")

	for _, host := range []string{"127.0.0.1:8080", "127.3.4.5", "[::1]:8080", "localhost:8080", "LOCALHOST", "ui.localhost", "dev-box:9000"} {
		res := a.do("POST", "/v1/jobs/plan-change/resume", "", noToken(host))
		assert.Equal(t, http.StatusOK, res.Status, "Host %s: %s", host, res.Body)
	}
	// With a token the token is the guard: any Host reaches authentication.
	a.http.Config.Handler = a.server.Handler()
	res = a.do("POST", "/v1/jobs/plan-change/pause", "", noToken("scheduler.example.com"))
	assert.Equal(t, http.StatusUnauthorized, res.Status)
}

// Refused attempts (a wrong token, the read-only token acting, a cross-site request) are
// audited, but a flood of them writes at most a burst of rows.
func TestRefusedRequestsAreAuditedWithinABound(t *testing.T) {
	t.Parallel()
	a := newTestAPI(t)
	read := NewServer(Config{DB: a.db.DB, InstanceID: testInstance, Jobs: testJobs(t), APIToken: testToken, ReadToken: "reader"})
	a.http.Config.Handler = read.Handler()

	res := a.do("GET", "/v1/jobs", "", header{"Authorization": "Bearer wrong"})
	require.Equal(t, http.StatusUnauthorized, res.Status)
	res = a.do("POST", "/v1/jobs/plan-change/pause", "", header{"Authorization": "Bearer reader"})
	require.Equal(t, http.StatusForbidden, res.Status)
	res = a.do("POST", "/v1/jobs/plan-change/pause", "", header{"Origin": "https://evil.example", "Sec-Fetch-Site": "cross-site"})
	require.Equal(t, http.StatusForbidden, res.Status)

	actions, err := a.db.Actions(context.Background(), store.ActionFilter{Limit: 10})
	require.NoError(t, err)
	require.Len(t, actions, 3)
	got := map[string]string{}
	for _, act := range actions {
		assert.Equal(t, store.ActionRefused, act.Action)
		assert.NotEmpty(t, act.RequestID)
		got[*act.Reason] = act.TokenKind
	}
	assert.Equal(t, map[string]string{
		"unauthorized: GET /v1/jobs":                       "invalid",
		"read-only-token: POST /v1/jobs/plan-change/pause": "read",
		"cross-origin: POST /v1/jobs/plan-change/pause":    "full",
	}, got)

	start := time.Now()
	for range 3 * refusalsBurst {
		req, err := http.NewRequest("GET", a.http.URL+"/v1/jobs", nil)
		require.NoError(t, err)
		raw, err := a.http.Client().Do(req)
		require.NoError(t, err)
		_, _ = io.Copy(io.Discard, raw.Body)
		raw.Body.Close()
	}
	// The caller's limiter refills one a second: whatever the flood took, at most the burst
	// plus the seconds it lasted were recorded for its address (the wrong token's included).
	bound := refusalsBurst + int(time.Since(start).Seconds()) + 1
	n := countRows(t, a, `SELECT count(*) FROM operator_actions WHERE action = 'refused' AND token_kind IN ('none', 'invalid')`)
	assert.LessOrEqual(t, n, bound, "a flood of refusals writes at most the burst")
	assert.GreaterOrEqual(t, n, refusalsBurst, "refusals are recorded up to the burst")
}

// /readyz answers anyone: its reason must not tell a stranger the database's host, user or
// name; the replica's log has the detail.
func TestReadyzDoesNotTellTheDatabaseError(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, err := store.Open(ctx, "postgres://secret_user:pw@127.0.0.1:1/secret_db?connect_timeout=1", store.Options{InstanceID: "x", LeaseTimeout: time.Second})
	require.NoError(t, err)
	defer db.Close()
	a := newTestAPI(t)
	a.http.Config.Handler = NewServer(Config{DB: db, InstanceID: testInstance}).Handler()
	res := a.do("GET", "/readyz", "", nil)
	require.Equal(t, http.StatusServiceUnavailable, res.Status)
	for _, secret := range []string{"secret_user", "secret_db", "127.0.0.1", ":1"} {
		assert.NotContains(t, string(res.Body), secret)
	}
	assert.Contains(t, string(res.Body), "database unreachable")
}

func countRows(t *testing.T, a *testAPI, sql string) int {
	t.Helper()
	var n int
	require.NoError(t, a.db.Pool.QueryRow(context.Background(), sql).Scan(&n))
	return n
}

// An action and its audit row commit together: when the row cannot be written, the action
// does not take effect either (and the client, answered 503, may retry it).
func TestAnActionThatCannotBeAuditedDoesNotHappen(t *testing.T) {
	t.Parallel()
	a := newTestAPI(t)
	ctx := context.Background()
	_, err := a.db.Pool.Exec(ctx, `
CREATE FUNCTION refuse_audit() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN RAISE EXCEPTION 'audit log unavailable'; END $$;
CREATE TRIGGER refuse_audit BEFORE INSERT ON operator_actions FOR EACH ROW EXECUTE FUNCTION refuse_audit();`)
	require.NoError(t, err)
	queued := a.insertRun(storetest.RunOpts{Job: "rounds-create", Status: store.StatusQueued})

	res := a.do("POST", "/v1/jobs/plan-change/pause", "", nil)
	assert.Equal(t, http.StatusServiceUnavailable, res.Status, "body: %s", res.Body)
	assert.Zero(t, countRows(t, a, `SELECT count(*) FROM job_settings WHERE paused`), "not paused")

	res = a.do("POST", "/v1/jobs/plan-change/runs", "", nil)
	assert.Equal(t, http.StatusServiceUnavailable, res.Status, "body: %s", res.Body)
	res = a.do("POST", "/v1/jobs/plan-change/runs", "", header{"Idempotency-Key": "9b1deb4d-3b7d-4bad-9bdd-2b0d7b3dcb6d"})
	assert.Equal(t, http.StatusServiceUnavailable, res.Status, "body: %s", res.Body)
	assert.Zero(t, countRows(t, a, `SELECT count(*) FROM job_runs WHERE job = 'plan-change'`), "no run queued")
	assert.Zero(t, countRows(t, a, `SELECT count(*) FROM idempotency_keys`), "the key is not spent")

	res = a.do("POST", fmt.Sprintf("/v1/runs/%d/cancel", queued), "", nil)
	assert.Equal(t, http.StatusServiceUnavailable, res.Status, "body: %s", res.Body)
	assert.Equal(t, 1, a.count(`SELECT count(*) FROM job_runs WHERE id = $1 AND status = 'queued'`, queued), "not cancelled")
}
