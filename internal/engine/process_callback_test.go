package engine

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schedulerhq/scheduler/internal/store"
	"github.com/schedulerhq/scheduler/internal/testdb"
)

// callbackTarget accepts every call (202) and keeps what each call carried; its answer
// echoes the token, as a careless target might, to prove the run's attempts never hold it.
type callbackTarget struct {
	mu    sync.Mutex
	calls []callbackCall
	got   chan callbackCall
}

type callbackCall struct{ runID, url, token string }

func (ct *callbackTarget) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	c := callbackCall{runID: r.Header.Get("X-Scheduler-Run-Id"), url: r.Header.Get("X-Scheduler-Callback-Url"),
		token: r.Header.Get("X-Scheduler-Callback-Token")}
	ct.mu.Lock()
	ct.calls = append(ct.calls, c)
	ct.mu.Unlock()
	ct.got <- c
	w.WriteHeader(http.StatusAccepted)
	fmt.Fprintf(w, "accepted with token %s", c.token)
}

// post sends a callback request with the run's token to replica address addr.
func post(addr, path, token, body string) (int, error) {
	req, err := http.NewRequest(http.MethodPost, "http://"+addr+path, strings.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer res.Body.Close()
	_, _ = io.Copy(io.Discard, res.Body)
	return res.StatusCode, nil
}

// A callback job's run is called once, stays running while its target sends heartbeats to
// any replica, through a SIGKILL of the leader (no second call, not abandoned, no recovery),
// and ends succeeded when the target completes it; a run without heartbeats ends timed_out
// within heartbeat_timeout + 3 s. The token appears in no replica's log and in no attempt.
// (The minute of heartbeats is shortened to cross one leader kill.)
func TestCallbackRunSurvivesLeaderKill(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real processes")
	}
	bin := buildScheduler(t, t.TempDir())
	db, url := testdb.Open(t, store.Options{InstanceID: "test"})
	ctx := context.Background()
	target := &callbackTarget{got: make(chan callbackCall, 10)}
	srv := httptest.NewServer(target)
	t.Cleanup(srv.Close)
	createDefinition(t, db, `{"name": "long-call", "schedule": "0 0 1 1 *", "timeout": "10m",
		"http": {"url": "`+srv.URL+`/work", "completion": "callback", "heartbeat_timeout": "3s"}}`)

	procs := map[string]*process{}
	addrs := map[string]string{}
	for _, id := range []string{"cb-a", "cb-b", "cb-c"} {
		addrs[id] = freeAddr(t)
		procs[id] = startProcessIn(t, "", bin, url, id, "SCHEDULER_HTTP_ALLOW=127.0.0.1/32", "SCHEDULER_HTTP_ADDR="+addrs[id],
			"SCHEDULER_JOB_ROUNDS_CLOSE_ENABLED=false")
	}
	// The heartbeat goroutine reads which replicas live; ProcessState is the test's own.
	var deadMu sync.Mutex
	dead := map[string]bool{}
	live := func() []string {
		deadMu.Lock()
		defer deadMu.Unlock()
		var out []string
		for id := range procs {
			if !dead[id] {
				out = append(out, addrs[id])
			}
		}
		return out
	}
	l := awaitLeader(t, db, procs, 0)
	run, _, err := db.QueueManualRun(ctx, "long-call", nil, []byte(`{}`))
	require.NoError(t, err)
	var call callbackCall
	select {
	case call = <-target.got:
	case <-time.After(waitTimeout):
		t.Fatal("the target was not called")
	}
	require.Equal(t, fmt.Sprint(run.ID), call.runID)
	require.True(t, strings.HasPrefix(call.url, "http://"+addrs[l.InstanceID]+"/v1/runs/"), call.url)
	require.NotEmpty(t, call.token)
	path := strings.TrimPrefix(call.url, "http://"+addrs[l.InstanceID])
	require.Equal(t, fmt.Sprintf("/v1/runs/%d/complete", run.ID), path)
	beat := strings.TrimSuffix(path, "/complete") + "/heartbeat"
	require.Eventually(t, func() bool {
		return count(t, db, `SELECT count(*) FROM job_runs WHERE id = $1 AND callback_accepted_at IS NOT NULL`, run.ID) == 1
	}, waitTimeout, 20*time.Millisecond, "the run was accepted")

	// Heartbeats every second, to each live replica in turn, for the rest of the test.
	stop := make(chan struct{})
	beats := make(chan int, 100)
	go func() {
		for i := 0; ; i++ {
			select {
			case <-stop:
				close(beats)
				return
			case <-time.After(time.Second):
			}
			as := live()
			code, err := post(as[i%len(as)], beat, call.token, "")
			if err == nil {
				beats <- code
			}
		}
	}()

	p := procs[l.InstanceID]
	deadMu.Lock()
	dead[l.InstanceID] = true
	deadMu.Unlock()
	require.NoError(t, p.cmd.Process.Signal(syscall.SIGKILL))
	_ = p.cmd.Wait()
	l2 := awaitLeader(t, db, procs, l.Epoch)
	// The new leader's election rescue and several watcher passes go by.
	time.Sleep(8 * time.Second)
	got, err := db.Run(ctx, run.ID)
	require.NoError(t, err)
	assert.Equal(t, store.StatusRunning, got.Status, "the accepted run is left to its target across the leader change")
	assert.Zero(t, count(t, db, `SELECT count(*) FROM job_runs WHERE recovers_run_id = $1`, run.ID), "no recovery run")
	target.mu.Lock()
	assert.Len(t, target.calls, 1, "the target was called once")
	target.mu.Unlock()
	assert.Greater(t, l2.Epoch, l.Epoch)

	code, err := post(live()[0], path, call.token, `{"status": "succeeded", "output": "done"}`)
	require.NoError(t, err)
	assert.Equal(t, http.StatusOK, code)
	code, err = post(live()[1], path, call.token, `{"status": "succeeded", "output": "done"}`)
	require.NoError(t, err)
	assert.Equal(t, http.StatusOK, code, "the same completion again, on another replica")
	close(stop)
	for c := range beats {
		assert.Contains(t, []int{http.StatusOK, http.StatusConflict}, c)
	}
	got, err = db.Run(ctx, run.ID)
	require.NoError(t, err)
	assert.Equal(t, store.StatusSucceeded, got.Status)

	// Without heartbeats: timed_out within heartbeat_timeout + 3 s of its acceptance.
	run2, _, err := db.QueueManualRun(ctx, "long-call", nil, []byte(`{}`))
	require.NoError(t, err)
	var call2 callbackCall
	select {
	case call2 = <-target.got:
	case <-time.After(waitTimeout):
		t.Fatal("the target was not called for the second run")
	}
	require.Eventually(t, func() bool {
		r, err := db.Run(ctx, run2.ID)
		return err == nil && r.Finished()
	}, 20*time.Second, 50*time.Millisecond)
	var status string
	var waited time.Duration
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT status, finished_at - callback_accepted_at FROM job_runs WHERE id = $1`, run2.ID).
		Scan(&status, &waited))
	assert.Equal(t, store.StatusTimedOut, status)
	assert.Less(t, waited, 6*time.Second, "timed out within heartbeat_timeout + 3 s")
	assert.GreaterOrEqual(t, waited, 3*time.Second)
	code, err = post(live()[0], fmt.Sprintf("/v1/runs/%d/complete", run2.ID), call2.token, `{"status": "succeeded"}`)
	require.NoError(t, err)
	assert.Equal(t, http.StatusConflict, code, "a completion after the timeout")

	// The tokens are in no log and no recorded attempt (the target echoed them).
	for _, p := range procs {
		b, err := os.ReadFile(p.log)
		require.NoError(t, err)
		for _, tok := range []string{call.token, call2.token} {
			assert.NotContains(t, string(b), tok, "the token is in %s's log", p.id)
		}
	}
	assert.Zero(t, count(t, db, `SELECT count(*) FROM run_attempts WHERE body LIKE '%' || $1 || '%' OR body LIKE '%' || $2 || '%'`,
		call.token, call2.token), "a token in a recorded attempt")
	assert.Equal(t, 2, count(t, db, `SELECT count(*) FROM run_attempts WHERE run_id IN ($1, $2) AND body LIKE '%[secret]%'`, run.ID, run2.ID))
}
