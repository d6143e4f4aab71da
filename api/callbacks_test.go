package api

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schedulerhq/scheduler/internal/store"
	"github.com/schedulerhq/scheduler/internal/store/storetest"
)

// callbackRun inserts a running callback run of job holding token's hash, as the leader
// leaves it once its target accepted the call.
func (a *testAPI) callbackRun(job, token string) int64 {
	a.t.Helper()
	now := time.Now()
	return a.insertRun(storetest.RunOpts{Job: job, Status: store.StatusRunning, StartedAt: now, Epoch: storetest.Ptr(int64(1)),
		CallbackTokenHash: store.CallbackTokenHash(token), CallbackAcceptedAt: now, CallbackHeartbeatAt: now,
		CallbackHeartbeatTimeout: time.Minute, CallbackDeadline: now.Add(time.Hour)})
}

// A completion is authenticated by its run's token alone: the API token, a forged token and
// another run's token are refused with 401 (and audited); the run's token completes it once,
// the same completion again is 200, another outcome 409, and a heartbeat after the end 409.
func TestCallbackCompletion(t *testing.T) {
	a := newTestAPI(t)
	const token, other = "schcb_token-of-run-one", "schcb_token-of-run-two"
	id := a.callbackRun("cb-job", token)
	id2 := a.callbackRun("cb-job-2", other)
	path := func(id int64, what string) string { return "/v1/runs/" + jsonInt(id) + "/" + what }
	as := func(tok string) header { return header{"Authorization": "Bearer " + tok} }

	for _, tok := range []string{"schcb_forged", other, testToken, ""} {
		h := as(tok)
		if tok == "" {
			h = header{"Authorization": ""}
		}
		res := a.do(http.MethodPost, path(id, "complete"), `{"status": "succeeded"}`, h)
		require.Equal(t, http.StatusUnauthorized, res.Status, "token %q: %s", tok, res.Body)
		assert.Equal(t, "unauthorized", res.problemType(t))
		require.Equal(t, http.StatusUnauthorized, a.do(http.MethodPost, path(id, "heartbeat"), "", h).Status)
	}
	assert.Equal(t, 8, a.count(`SELECT count(*) FROM operator_actions WHERE action = 'refused' AND reason LIKE 'unauthorized: POST /v1/runs/%'`),
		"every refused callback is audited")
	assert.Equal(t, store.StatusRunning, a.runStatus(id), "no refused request changed the run")

	res := a.do(http.MethodPost, path(id, "heartbeat"), "", as(token))
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)

	done := `{"status": "succeeded", "output": {"rows": 42}}`
	res = a.do(http.MethodPost, path(id, "complete"), done, as(token))
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	assert.Equal(t, store.StatusSucceeded, a.runStatus(id))
	res = a.do(http.MethodPost, path(id, "complete"), done, as(token))
	assert.Equal(t, http.StatusOK, res.Status, "the same completion again: %s", res.Body)
	res = a.do(http.MethodPost, path(id, "complete"), `{"status": "failed"}`, as(token))
	assert.Equal(t, http.StatusConflict, res.Status, "another outcome of a finished run: %s", res.Body)
	assert.Equal(t, http.StatusConflict, a.do(http.MethodPost, path(id, "heartbeat"), "", as(token)).Status)
	assert.Equal(t, store.StatusSucceeded, a.runStatus(id))

	view := a.do(http.MethodGet, "/v1/runs/"+jsonInt(id), "", nil).JSON(t)
	assert.Equal(t, `{"rows":42}`, strings.ReplaceAll(view["output"].(string), " ", ""))

	// A long output is kept to its first 4 KiB; a wrong status is refused before the token.
	big := strings.Repeat("é", 5000)
	res = a.do(http.MethodPost, path(id2, "complete"), `{"status": "nope"}`, as(other))
	assert.Equal(t, http.StatusBadRequest, res.Status)
	res = a.do(http.MethodPost, path(id2, "complete"), `{"status": "failed", "output": "`+big+`"}`, as(other))
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	out := a.do(http.MethodGet, "/v1/runs/"+jsonInt(id2), "", nil).JSON(t)["output"].(string)
	assert.LessOrEqual(t, len(out), 4096)
	assert.Greater(t, len(out), 4000)
	assert.Equal(t, store.StatusFailed, a.runStatus(id2))
}

func (a *testAPI) runStatus(id int64) string {
	a.t.Helper()
	run, err := a.db.Run(a.t.Context(), id)
	require.NoError(a.t, err)
	return run.Status
}

func jsonInt(id int64) string {
	b, _ := json.Marshal(id)
	return string(b)
}
