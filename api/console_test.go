package api

import (
	"context"
	"fmt"
	"net/http"
	"regexp"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schedulerhq/scheduler/internal/metrics"
	"github.com/schedulerhq/scheduler/internal/store"
	"github.com/schedulerhq/scheduler/internal/store/storetest"
	"github.com/schedulerhq/scheduler/internal/testpace"
)

const (
	testReadToken = "read-only-token"
	testNextToken = "next-token"
)

// newAccessAPI is newTestAPI with the read-only and the next token configured too.
func newAccessAPI(t *testing.T) *testAPI {
	t.Helper()
	a := newTestAPI(t)
	a.server = NewServer(Config{DB: a.db.DB, InstanceID: testInstance, Jobs: testJobs(t), APIToken: testToken,
		APITokenNext: testNextToken, ReadToken: testReadToken, Recorder: metrics.New()})
	a.http.Config.Handler = a.server.Handler()
	return a
}

func TestReadTokenReadsEverythingAndChangesNothing(t *testing.T) {
	t.Parallel()
	a := newAccessAPI(t)
	read := header{"Authorization": "Bearer " + testReadToken}
	run := fmt.Sprintf("/v1/runs/%d", a.insertRun(storetest.RunOpts{Job: "plan-change", Status: store.StatusRunning}))
	for _, path := range []string{"/v1/jobs", "/v1/jobs/plan-change", "/v1/jobs/plan-change/runs", run,
		"/v1/instances", "/v1/locks", "/v1/audit"} {
		res := a.do("GET", path, "", read)
		assert.Equal(t, http.StatusOK, res.Status, "GET %s: %s", path, res.Body)
	}
	for _, path := range []string{"/v1/jobs/plan-change/pause", "/v1/jobs/plan-change/resume",
		"/v1/jobs/plan-change/runs", run + "/cancel", "/v1/leader/step-down"} {
		res := a.do("POST", path, `{"reason": "try"}`, read)
		require.Equal(t, http.StatusForbidden, res.Status, "POST %s: %s", path, res.Body)
		assert.Equal(t, "read-only-token", res.problemType(t))
		assert.Contains(t, res.JSON(t)["detail"], "SCHEDULER_API_TOKEN")
	}
	assert.Equal(t, 1, a.count(`SELECT count(*) FROM job_runs`))
	assert.Equal(t, 0, a.count(`SELECT count(*) FROM job_runs WHERE cancel_requested`))
	assert.Zero(t, a.count(`SELECT count(*) FROM job_settings`))
	assert.Zero(t, a.count(`SELECT count(*) FROM operator_actions WHERE action <> 'refused'`), "no action recorded")
	assert.Equal(t, 5, a.count(`SELECT count(*) FROM operator_actions WHERE action = 'refused' AND token_kind = 'read'`),
		"each refused action is audited")
}

func TestNextTokenActsDuringARotation(t *testing.T) {
	t.Parallel()
	a := newAccessAPI(t)
	res := a.do("POST", "/v1/jobs/plan-change/pause", "", header{"Authorization": "Bearer " + testNextToken})
	require.Equal(t, http.StatusOK, res.Status, "body: %s", res.Body)
	res = a.do("POST", "/v1/jobs/plan-change/pause", "", header{"Authorization": "Bearer " + testNextToken + "x"})
	assert.Equal(t, http.StatusUnauthorized, res.Status)
	res = a.do("GET", "/v1/audit", "", nil)
	actions := res.JSON(t)["actions"].([]any)
	require.Len(t, actions, 2, "the pause and the refused attempt, newest first")
	assert.Equal(t, "refused", actions[0].(map[string]any)["action"])
	assert.Equal(t, "full-next", actions[1].(map[string]any)["token_kind"])
}

// A page on another site can make a browser POST to the API, but not with the bearer
// token: that is refused 401, and, when no token is configured at all (loopback), the
// browser's Sec-Fetch-Site / Origin headers get it refused 403.
func TestForgedCrossSitePostIsRefused(t *testing.T) {
	t.Parallel()
	a := newTestAPI(t)
	forged := header{"Authorization": "", "Origin": "https://evil.example", "Sec-Fetch-Site": "cross-site",
		"Content-Type": "application/x-www-form-urlencoded"}
	res := a.do("POST", "/v1/jobs/plan-change/runs", "", forged)
	assert.Equal(t, http.StatusUnauthorized, res.Status)

	open := NewServer(Config{DB: a.db.DB, InstanceID: testInstance, Jobs: testJobs(t)})
	a.http.Config.Handler = open.Handler()
	res = a.do("POST", "/v1/jobs/plan-change/runs", "", forged)
	require.Equal(t, http.StatusForbidden, res.Status, "body: %s", res.Body)
	assert.Equal(t, "cross-origin", res.problemType(t))
	assert.Zero(t, a.count(`SELECT count(*) FROM job_runs`))
	// The same request from the page's own origin, or from a client that is not a browser, works.
	res = a.do("POST", "/v1/jobs/plan-change/runs", "", header{"Authorization": "", "Sec-Fetch-Site": "same-origin"})
	assert.Equal(t, http.StatusAccepted, res.Status, "body: %s", res.Body)
	res = a.do("POST", "/v1/jobs/plan-change/pause", "", header{"Authorization": ""})
	assert.Equal(t, http.StatusOK, res.Status, "body: %s", res.Body)
	assert.Equal(t, "none", a.do("GET", "/v1/audit", "", header{"Authorization": ""}).JSON(t)["actions"].([]any)[0].(map[string]any)["token_kind"])
}

func TestEveryActionIsAudited(t *testing.T) {
	t.Parallel()
	a := newTestAPI(t)
	res := a.do("POST", "/v1/jobs/plan-change/runs", `{"reason": "backfill"}`, header{"X-Request-Id": "req-trigger"})
	require.Equal(t, http.StatusAccepted, res.Status)
	runID := int64(res.JSON(t)["id"].(float64))
	res = a.do("POST", fmt.Sprintf("/v1/runs/%d/cancel", runID), `{"reason": "wrong day"}`, nil)
	require.Equal(t, http.StatusOK, res.Status, "body: %s", res.Body)
	res = a.do("POST", "/v1/jobs/plan-change/pause", `{"reason": "incident 42"}`, nil)
	require.Equal(t, http.StatusOK, res.Status)
	res = a.do("POST", "/v1/jobs/plan-change/resume", "", nil)
	require.Equal(t, http.StatusOK, res.Status)
	res = a.do("POST", "/v1/jobs/plan-change/resume", `{"reason": 7}`, nil)
	require.Equal(t, http.StatusBadRequest, res.Status)
	// No replica leads in this test: 409, and nothing recorded.
	res = a.do("POST", "/v1/leader/step-down", "", nil)
	require.Equal(t, http.StatusConflict, res.Status)
	assert.Equal(t, "no-leader", res.problemType(t))

	res = a.do("GET", "/v1/audit?limit=3", "", nil)
	require.Equal(t, http.StatusOK, res.Status)
	page := res.JSON(t)
	actions := page["actions"].([]any)
	require.Len(t, actions, 3)
	get := func(i int) map[string]any { return actions[i].(map[string]any) }
	assert.Equal(t, "resume", get(0)["action"])
	assert.Nil(t, get(0)["reason"])
	assert.Equal(t, "pause", get(1)["action"])
	assert.Equal(t, "incident 42", get(1)["reason"])
	assert.Equal(t, "plan-change", get(1)["job"])
	assert.Equal(t, "cancel", get(2)["action"])
	assert.Equal(t, float64(runID), get(2)["run_id"])
	assert.Equal(t, "full", get(2)["token_kind"])
	assert.Equal(t, "127.0.0.1", get(2)["remote_addr"])
	at, err := time.Parse(time.RFC3339Nano, get(2)["at"].(string))
	require.NoError(t, err)
	assert.WithinDuration(t, time.Now(), at, time.Minute)

	res = a.do("GET", "/v1/audit?limit=3&cursor="+page["next_cursor"].(string), "", nil)
	actions = res.JSON(t)["actions"].([]any)
	require.Len(t, actions, 1)
	assert.Equal(t, "trigger", get(0)["action"])
	assert.Equal(t, "backfill", get(0)["reason"])
	assert.Equal(t, "req-trigger", get(0)["request_id"])
	assert.Nil(t, res.JSON(t)["next_cursor"])

	res = a.do("GET", "/v1/audit?cursor=bogus", "", nil)
	assert.Equal(t, "invalid-cursor", res.problemType(t))
}

func TestStepDownAsksTheLockHolder(t *testing.T) {
	t.Parallel()
	a := newTestAPI(t)
	// Play the leader: hold the leader lock on a lock session that listens for step-downs,
	// and own the leader row.
	session, err := a.db.OpenLockSession(t.Context())
	require.NoError(t, err)
	defer session.Close()
	require.NoError(t, session.Lock(t.Context()))
	listener, err := a.db.OpenListenSession(t.Context())
	require.NoError(t, err)
	defer listener.Close()
	require.NoError(t, listener.Listen(t.Context(), store.StepDownChannel, true))
	a.exec(`UPDATE scheduler_leader SET epoch = 7, instance_id = 'leader-1', since = now() WHERE id = 1`)

	res := a.do("POST", "/v1/leader/step-down", `{"reason": "drain node 1"}`, nil)
	require.Equal(t, http.StatusAccepted, res.Status, "body: %s", res.Body)
	assert.Equal(t, "leader-1", res.JSON(t)["instance_id"])
	assert.Equal(t, float64(7), res.JSON(t)["epoch"])
	// The notification's deadline follows the machine's pace: 10 s on an idle one.
	ctx, cancel := context.WithTimeout(t.Context(), testpace.Scaled(10*time.Second))
	defer cancel()
	channel, payload, ok, err := listener.Wait(ctx)
	require.NoError(t, err)
	require.True(t, ok, "a notification arrived")
	assert.Equal(t, store.StepDownChannel, channel)
	assert.Equal(t, "7", payload, "the request names the leader's epoch")
	assert.Equal(t, 1, a.count(`SELECT count(*) FROM operator_actions WHERE action = 'step-down' AND reason = 'drain node 1'`))
	// The request itself is the row the leader obeys, written with the audit row.
	msgs, err := session.TakeStepDown(ctx, 7, "leader-1")
	require.NoError(t, err)
	require.Len(t, msgs, 1)
	assert.Equal(t, "drain node 1", *msgs[0].Reason)
	assert.Equal(t, 1, a.count(`SELECT count(*) FROM operator_actions a JOIN scheduler_control c USING (request_id)
		WHERE a.action = 'step-down' AND c.kind = 'step-down' AND c.token_kind = a.token_kind`))
}

func TestJobShowsScheduleInWordsAndNextRuns(t *testing.T) {
	t.Parallel()
	a := newTestAPI(t)
	j := a.do("GET", "/v1/jobs/plan-change", "", nil).JSON(t)
	assert.Equal(t, "every day at 02:00 UTC", j["schedule_text"])
	assert.Equal(t, "UTC", j["time_zone"])
	next := j["next_runs"].([]any)
	require.Len(t, next, 5)
	assert.Equal(t, j["next_run_at"], next[0])
	first, _ := time.Parse(time.RFC3339, next[0].(string))
	second, _ := time.Parse(time.RFC3339, next[1].(string))
	assert.Equal(t, 24*time.Hour, second.Sub(first))

	a.do("POST", "/v1/jobs/plan-change/pause", "", nil)
	j = a.do("GET", "/v1/jobs/plan-change", "", nil).JSON(t)
	assert.Empty(t, j["next_runs"])
	assert.Empty(t, a.do("GET", "/v1/jobs/status-sync", "", nil).JSON(t)["next_runs"], "disabled")
}

func TestDashboardIsServed(t *testing.T) {
	t.Parallel()
	a := newTestAPI(t)
	noAuth := header{"Authorization": ""}
	res := a.do("GET", "/ui/", "", noAuth)
	require.Equal(t, http.StatusOK, res.Status)
	assert.Contains(t, res.Header.Get("Content-Type"), "text/html")
	assert.Contains(t, string(res.Body), `<script src="app.js"`)
	assert.Contains(t, res.Header.Get("Content-Security-Policy"), "default-src 'self'")
	// The console is a few scripts, each named by the page and served beside it.
	scripts := regexp.MustCompile(`<script src="([a-z-]+\.js)"`).FindAllStringSubmatch(string(res.Body), -1)
	require.NotEmpty(t, scripts)
	for _, m := range scripts {
		res = a.do("GET", "/ui/"+m[1], "", noAuth)
		require.Equal(t, http.StatusOK, res.Status, "/ui/%s", m[1])
		assert.Contains(t, res.Header.Get("Content-Type"), "javascript", "/ui/%s", m[1])
	}
	res = a.do("GET", "/ui/style.css", "", noAuth)
	require.Equal(t, http.StatusOK, res.Status)
	res = a.do("GET", "/ui/nothing.js", "", noAuth)
	assert.Equal(t, http.StatusNotFound, res.Status)

	req, err := http.NewRequest("GET", a.http.URL+"/ui", nil)
	require.NoError(t, err)
	resp, err := http.DefaultTransport.RoundTrip(req)
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusMovedPermanently, resp.StatusCode)
	assert.Equal(t, "/ui/", resp.Header.Get("Location"))
}
