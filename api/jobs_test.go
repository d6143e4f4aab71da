package api

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schedulerhq/scheduler/client"
	"github.com/schedulerhq/scheduler/internal/config"
	"github.com/schedulerhq/scheduler/internal/store"
	"github.com/schedulerhq/scheduler/internal/store/storetest"
	"github.com/schedulerhq/scheduler/internal/testdb"
)

func TestOpenRoutesNeedNoToken(t *testing.T) {
	t.Parallel()
	a := newTestAPI(t)
	noAuth := header{"Authorization": ""}

	res := a.do("GET", "/healthz", "", noAuth)
	assert.Equal(t, http.StatusOK, res.Status)
	res = a.do("GET", "/readyz", "", noAuth)
	assert.Equal(t, http.StatusOK, res.Status, "body: %s", res.Body)
	res = a.do("GET", "/metrics", "", noAuth)
	assert.Equal(t, http.StatusOK, res.Status)
	assert.Contains(t, string(res.Body), "go_goroutines")
	res = a.do("GET", "/openapi.yaml", "", noAuth)
	assert.Equal(t, http.StatusOK, res.Status)
	assert.Equal(t, OpenAPI, res.Body)
	assert.NotEmpty(t, res.Header.Get("X-Request-Id"))
}

func TestEveryV1RouteNeedsTheToken(t *testing.T) {
	t.Parallel()
	a := newTestAPI(t)
	routes := [][2]string{
		{"GET", "/v1/leader"}, {"GET", "/v1/instances"}, {"GET", "/v1/locks"}, {"GET", "/v1/jobs"},
		{"GET", "/v1/jobs/plan-change"}, {"POST", "/v1/jobs/plan-change/pause"}, {"POST", "/v1/jobs/plan-change/resume"},
		{"POST", "/v1/jobs/plan-change/runs"}, {"GET", "/v1/jobs/plan-change/runs"}, {"GET", "/v1/runs/1"},
		{"POST", "/v1/runs/1/cancel"}, {"GET", "/v1/audit"}, {"POST", "/v1/leader/step-down"},
		{"POST", "/v1/jobs"}, {"PUT", "/v1/jobs/daily-report"}, {"DELETE", "/v1/jobs/daily-report"},
	}
	for _, rt := range routes {
		for _, auth := range []string{"", "Bearer wrong-token", "Bearer " + testToken + "x", "Basic " + testToken, "Bearer "} {
			res := a.do(rt[0], rt[1], "", header{"Authorization": auth})
			require.Equal(t, http.StatusUnauthorized, res.Status, "%s %s with Authorization %q", rt[0], rt[1], auth)
			assert.Equal(t, `Bearer realm="scheduler"`, res.Header.Get("WWW-Authenticate"))
			assert.Equal(t, "unauthorized", res.problemType(t))
		}
	}
	// Nothing was changed by the refused requests.
	assert.Zero(t, a.count(`SELECT count(*) FROM job_runs`))
	assert.Zero(t, a.count(`SELECT count(*) FROM job_settings`))
	assert.Zero(t, a.count(`SELECT count(*) FROM job_definitions`))

	// The scheme is case-insensitive (RFC 9110); the token is not.
	res := a.do("GET", "/v1/jobs", "", header{"Authorization": "bearer " + testToken})
	assert.Equal(t, http.StatusOK, res.Status)
	res = a.do("GET", "/v1/jobs", "", header{"Authorization": "Bearer " + strings.ToUpper(testToken)})
	assert.Equal(t, http.StatusUnauthorized, res.Status)
}

func TestUnknownRoutesAndMethodsAreProblems(t *testing.T) {
	t.Parallel()
	a := newTestAPI(t)
	res := a.do("GET", "/v1/nope", "", nil)
	assert.Equal(t, http.StatusNotFound, res.Status)
	assert.Equal(t, "not-found", res.problemType(t))
	res = a.do("DELETE", "/v1/jobs", "", nil)
	assert.Equal(t, http.StatusMethodNotAllowed, res.Status)
	assert.Equal(t, "method-not-allowed", res.problemType(t))
}

func TestJobsListAndGet(t *testing.T) {
	t.Parallel()
	a := newTestAPI(t)
	testdb.AddRunDays(t, a.db.Pool, time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(2025, 1, 2, 0, 0, 0, 0, time.UTC))
	at := func(day, sec int) time.Time { return time.Date(2025, 1, day, 2, 0, sec, 0, time.UTC) }
	a.insertRuns(
		storetest.RunOpts{Job: "plan-change", Status: store.StatusSucceeded, ScheduledAt: at(1, 0), StartedAt: at(1, 1), FinishedAt: at(1, 3)},
		storetest.RunOpts{Job: "plan-change", Status: store.StatusFailed, ScheduledAt: at(2, 0), StartedAt: at(2, 1), FinishedAt: at(2, 2)})

	res := a.do("GET", "/v1/jobs", "", nil)
	require.Equal(t, http.StatusOK, res.Status)
	list := res.JSON(t)["jobs"].([]any)
	require.Len(t, list, 3)
	names := []string{}
	for _, j := range list {
		names = append(names, j.(map[string]any)["name"].(string))
	}
	assert.Equal(t, []string{"rounds-create", "plan-change", "status-sync"}, names, "configuration order")

	pc := list[1].(map[string]any)
	assert.Equal(t, "0 2 * * *", pc["schedule"])
	assert.Equal(t, true, pc["enabled"])
	assert.Equal(t, false, pc["paused"])
	assert.Equal(t, "10m0s", pc["timeout"])
	assert.Equal(t, "1h0m0s", pc["catchup"])
	require.NotNil(t, pc["next_run_at"])
	assert.True(t, strings.HasSuffix(pc["next_run_at"].(string), "T02:00:00Z"), "next slot of 0 2 * * *: %v", pc["next_run_at"])
	last := pc["last_run"].(map[string]any)
	assert.Equal(t, "failed", last["status"], "the most recent run")
	assert.Equal(t, float64(1000), last["duration_ms"])
	assert.Nil(t, list[0].(map[string]any)["last_run"], "a job that never ran")
	assert.Nil(t, list[2].(map[string]any)["next_run_at"], "a disabled job has no next run")

	res = a.do("GET", "/v1/jobs/plan-change", "", nil)
	require.Equal(t, http.StatusOK, res.Status)
	assert.Equal(t, pc, res.JSON(t))

	res = a.do("GET", "/v1/jobs/no-such-job", "", nil)
	assert.Equal(t, http.StatusNotFound, res.Status)
	assert.Equal(t, "job-not-found", res.problemType(t))
	assert.Equal(t, "name", res.problemField(t))
}

func TestPauseAndResumePersist(t *testing.T) {
	t.Parallel()
	a := newTestAPI(t)
	res := a.do("POST", "/v1/jobs/rounds-create/pause", "", nil)
	require.Equal(t, http.StatusOK, res.Status)
	assert.Equal(t, true, res.JSON(t)["paused"])
	assert.Nil(t, res.JSON(t)["next_run_at"], "a paused job has no next run")
	assert.Equal(t, 1, a.count(`SELECT count(*) FROM job_settings WHERE job = 'rounds-create' AND paused`))

	// Another replica (another Server on the same database) sees it.
	other := NewServer(Config{DB: a.db.DB, InstanceID: "other", Jobs: testJobs(t)})
	views, err := other.jobViews(t.Context(), other.cfg.Jobs...)
	require.NoError(t, err)
	assert.True(t, views[0].Paused)

	res = a.do("POST", "/v1/jobs/rounds-create/pause", "", nil)
	require.Equal(t, http.StatusOK, res.Status, "pausing twice is harmless")
	res = a.do("POST", "/v1/jobs/rounds-create/resume", "", nil)
	require.Equal(t, http.StatusOK, res.Status)
	assert.Equal(t, false, res.JSON(t)["paused"])
	assert.NotNil(t, res.JSON(t)["next_run_at"])
	assert.Equal(t, 1, a.count(`SELECT count(*) FROM job_settings WHERE job = 'rounds-create' AND NOT paused`))

	for _, p := range []string{"/v1/jobs/nope/pause", "/v1/jobs/nope/resume"} {
		res = a.do("POST", p, "", nil)
		assert.Equal(t, http.StatusNotFound, res.Status)
		assert.Equal(t, "job-not-found", res.problemType(t))
	}
	assert.Equal(t, 1, a.count(`SELECT count(*) FROM job_settings`))
}

// jobViews shows built-in jobs as another replica's API would.
func (s *Server) jobViews(ctx context.Context, list ...config.Job) ([]client.Job, error) {
	refs := make([]jobRef, len(list))
	for i, j := range list {
		refs[i] = jobRef{conf: j}
	}
	ctx, cancel := context.WithTimeout(ctx, queryTimeout)
	defer cancel()
	return s.views(ctx, s.cfg.DB, refs...)
}
