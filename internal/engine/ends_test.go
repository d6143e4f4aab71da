package engine

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schedulerhq/scheduler/internal/runend"
	"github.com/schedulerhq/scheduler/internal/store"
	"github.com/schedulerhq/scheduler/internal/store/storetest"
	"github.com/schedulerhq/scheduler/internal/testdb"
)

// pauseOutcome is what an automatic pause left: its audit row's reason, its paused event's
// detail, how many of each, and whether the pause, its audit row and its event were written
// by the transaction that recorded the run's end that caused them.
type pauseOutcome struct {
	Reason, Detail         string
	Pauses, Events, Failed int
	WithTheEnd             bool
}

func pausedBy(t *testing.T, db *testdb.DB, job string) pauseOutcome {
	t.Helper()
	var o pauseOutcome
	require.NoError(t, db.Pool.QueryRow(context.Background(), `
		SELECT a.reason, n.detail,
		       (SELECT count(*) FROM operator_actions WHERE action = 'auto-pause' AND job = $1),
		       (SELECT count(*) FROM scheduler_notifications WHERE event = 'paused' AND job = $1),
		       (SELECT count(*) FROM job_runs WHERE job = $1 AND status IN ('failed', 'timed_out')),
		       a.xmin = r.xmin AND n.xmin = r.xmin AND s.xmin = r.xmin
		FROM operator_actions a
		JOIN job_runs r ON r.id = a.run_id
		JOIN scheduler_notifications n ON n.job = a.job AND n.event = 'paused' AND n.run_id = a.run_id
		JOIN job_settings s ON s.job = a.job AND s.paused
		WHERE a.action = 'auto-pause' AND a.job = $1`, job).
		Scan(&o.Reason, &o.Detail, &o.Pauses, &o.Events, &o.Failed, &o.WithTheEnd))
	return o
}

// Every way a run ends decides its meaning alike (internal/runend): a job failing
// pause_after_failures times in a row pauses the same, with the same audit row and paused
// event, all written by the transaction of the end that made it, whether its runs ended by
// the leader's finisher (a response job), by the target's completion on any replica, or by
// the callback watch (a callback job whose target went silent).
func TestEveryWayARunEndsPausesItsJobAlike(t *testing.T) {
	db, url := newDB(t)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusBadRequest)
	}))
	t.Cleanup(srv.Close)
	n := startNode(t, url, "a", nodeOptions{runtime: runtimeFor(t, "127.0.0.1/32"), pollInterval: 200 * time.Millisecond})
	awaitSignal(t, &n.en.testSignals.leading, "leading")
	rules := `"pause_after_failures": 2,
		"notify": [{"on": ["failed", "timed_out", "paused"], "webhook": {"url": "https://hooks.example.com/hook", "signing_secret": "HOOK_SIGNING"}}]`
	for _, name := range []string{"completed", "silent"} {
		createDefinition(t, db, `{"name": "`+name+`", "schedule": "0 2 * * *", `+rules+`,
			"http": {"url": "`+srv.URL+`", "completion": "callback"}}`)
	}
	createDefinition(t, db, `{"name": "response", "schedule": "@every 1s", "retry": {"max_attempts": 1}, `+rules+`,
		"http": {"url": "`+srv.URL+`"}}`)

	ctx := context.Background()
	accepted := func(job, token string, deadline time.Duration) int64 {
		t.Helper()
		now := time.Now()
		return storetest.Run(ctx, t, db.Pool, storetest.RunOpts{Job: job, Status: store.StatusRunning, StartedAt: now,
			Epoch: storetest.Ptr(int64(1)), CallbackTokenHash: store.CallbackTokenHash(token), CallbackAcceptedAt: now,
			CallbackHeartbeatAt: now, CallbackHeartbeatTimeout: time.Hour, CallbackDeadline: now.Add(deadline)}).ID
	}
	for i, token := range []string{"schcb_one", "schcb_two"} {
		id := accepted("completed", token, time.Hour)
		out, _, paused, err := runend.Complete(ctx, db.DB, store.Completion{RunID: id, TokenHash: store.CallbackTokenHash(token),
			Status: store.StatusFailed}, "api-replica")
		require.NoError(t, err)
		require.Equal(t, store.CallbackDone, out)
		assert.Len(t, paused, i, "the second failure in a row paused the job")

		id = accepted("silent", token+"-silent", 0)
		deadline := time.Now().Add(waitTimeout)
		for ended := false; !ended; {
			require.True(t, time.Now().Before(deadline), "the watch ended run %d", id)
			for _, x := range awaitSignal(t, &n.en.testSignals.callbackWatch, "a callback watch pass") {
				ended = ended || x.ID == id
			}
		}
	}
	require.Eventually(t, func() bool {
		return count(t, db, `SELECT count(*) FROM job_settings WHERE job = 'response' AND paused`) == 1
	}, waitTimeout, 20*time.Millisecond, "the response job paused itself")

	want := pauseOutcome{Reason: "paused after 2 failed runs in a row (pause_after_failures); resume it once the target works",
		Detail: "paused after 2 failed runs in a row (pause_after_failures)", Pauses: 1, Events: 1, Failed: 2, WithTheEnd: true}
	for _, job := range []string{"response", "completed", "silent"} {
		assert.Equal(t, want, pausedBy(t, db, job), job)
	}
	assert.Equal(t, store.StatusTimedOut, getRun(t, db, int64(count(t, db, `SELECT max(id) FROM job_runs WHERE job = 'silent'`))).Status)
}
