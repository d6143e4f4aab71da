package api

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schedulerhq/scheduler/internal/store"
)

const (
	key1 = "3f2504e0-4f89-41d3-9a0c-0305e82c3301"
	key2 = "9b2f6c1e-7d4a-4e8b-8f3c-2a1b0c9d8e7f"
)

func TestTriggerQueuesOneManualRun(t *testing.T) {
	t.Parallel()
	a := newTestAPI(t)
	res := a.do("POST", "/v1/jobs/plan-change/runs", `{"reason": "backfill after outage", "params": {"dry_run": true}}`, nil)
	require.Equal(t, http.StatusAccepted, res.Status, "body: %s", res.Body)
	run := res.JSON(t)
	id := int64(run["id"].(float64))
	assert.Equal(t, fmt.Sprintf("/v1/runs/%d", id), res.Header.Get("Location"))
	assert.Equal(t, "queued", run["status"])
	assert.Equal(t, "manual", run["trigger"])
	assert.Equal(t, "backfill after outage", run["reason"])
	assert.Equal(t, map[string]any{"dry_run": true}, run["params"])
	assert.Equal(t, 1, a.count(`SELECT count(*) FROM job_runs WHERE id = $1 AND job = 'plan-change' AND status = 'queued'
		AND trigger = 'manual' AND params = '{"dry_run": true}' AND reason = 'backfill after outage'`, id))

	// While it is queued (and then running), a trigger answers the same run.
	res = a.do("POST", "/v1/jobs/plan-change/runs", "", nil)
	require.Equal(t, http.StatusOK, res.Status)
	assert.Equal(t, float64(id), res.JSON(t)["id"])
	a.exec(`UPDATE job_runs SET status = 'running', started_at = now(), instance_id = 'leader', epoch = 1 WHERE id = $1`, id)
	res = a.do("POST", "/v1/jobs/plan-change/runs", "", nil)
	require.Equal(t, http.StatusOK, res.Status)
	assert.Equal(t, float64(id), res.JSON(t)["id"])
	assert.Equal(t, "running", res.JSON(t)["status"])

	// Once it finished, a trigger queues a new run.
	a.exec(`UPDATE job_runs SET status = 'succeeded', finished_at = now() WHERE id = $1`, id)
	res = a.do("POST", "/v1/jobs/plan-change/runs", "", nil)
	require.Equal(t, http.StatusAccepted, res.Status)
	assert.NotEqual(t, float64(id), res.JSON(t)["id"])
	assert.Equal(t, 2, a.count(`SELECT count(*) FROM job_runs`))
}

func TestTriggerRefusesBadInput(t *testing.T) {
	t.Parallel()
	a := newTestAPI(t)
	cases := []struct {
		name, path, body string
		h                header
		status           int
		problem, field   string
	}{
		{"unknown job", "/v1/jobs/nope/runs", "", nil, 404, "job-not-found", "name"},
		{"disabled job", "/v1/jobs/status-sync/runs", "", nil, 409, "job-disabled", ""},
		{"unknown field", "/v1/jobs/plan-change/runs", `{"reason": "x", "priority": 1}`, nil, 400, "invalid-json", "priority"},
		{"unknown param", "/v1/jobs/plan-change/runs", `{"params": {"dry_run": true, "force": true}}`, nil, 400, "invalid-json", "params"},
		{"params not an object", "/v1/jobs/plan-change/runs", `{"params": [1]}`, nil, 400, "invalid-json", "params"},
		{"wrong type", "/v1/jobs/plan-change/runs", `{"reason": 42}`, nil, 400, "invalid-json", "reason"},
		{"malformed JSON", "/v1/jobs/plan-change/runs", `{"reason": "x"`, nil, 400, "invalid-json", ""},
		{"not an object", "/v1/jobs/plan-change/runs", `[]`, nil, 400, "invalid-json", ""},
		{"trailing data", "/v1/jobs/plan-change/runs", `{} {}`, nil, 400, "invalid-json", ""},
		{"reason too long", "/v1/jobs/plan-change/runs", `{"reason": "` + strings.Repeat("x", 501) + `"}`, nil, 400, "invalid-request", "reason"},
		{"not JSON", "/v1/jobs/plan-change/runs", `reason=x`, header{"Content-Type": "application/x-www-form-urlencoded"}, 415, "unsupported-media-type", "Content-Type"},
		{"body too large", "/v1/jobs/plan-change/runs", `{"reason": "` + strings.Repeat("x", maxBodyBytes) + `"}`, nil, 413, "body-too-large", ""},
		{"bad key", "/v1/jobs/plan-change/runs", "", header{"Idempotency-Key": "not-a-uuid"}, 400, "invalid-idempotency-key", "Idempotency-Key"},
		{"UUID v1 key", "/v1/jobs/plan-change/runs", "", header{"Idempotency-Key": "6ba7b810-9dad-11d1-80b4-00c04fd430c8"}, 400, "invalid-idempotency-key", "Idempotency-Key"},
		{"bad wait", "/v1/jobs/plan-change/runs?wait=soon", "", nil, 400, "invalid-request", "wait"},
		{"wait too long", "/v1/jobs/plan-change/runs?wait=6m", "", nil, 400, "invalid-request", "wait"},
		{"negative wait", "/v1/jobs/plan-change/runs?wait=-1s", "", nil, 400, "invalid-request", "wait"},
	}
	for _, c := range cases {
		res := a.do("POST", c.path, c.body, c.h)
		require.Equal(t, c.status, res.Status, "%s: %s", c.name, res.Body)
		assert.Equal(t, c.problem, res.problemType(t), c.name)
		if c.field != "" {
			assert.Equal(t, c.field, res.problemField(t), c.name)
		}
	}
	assert.Zero(t, a.count(`SELECT count(*) FROM job_runs`), "no refused trigger queued a run")
	assert.Zero(t, a.count(`SELECT count(*) FROM idempotency_keys`))
}

func TestIdempotencyKeyReplaysTheFirstAnswer(t *testing.T) {
	t.Parallel()
	a := newTestAPI(t)
	first := a.do("POST", "/v1/jobs/plan-change/runs", `{"reason":"r","params":{"dry_run":true}}`, header{"Idempotency-Key": key1})
	require.Equal(t, http.StatusAccepted, first.Status)
	id := first.JSON(t)["id"]

	// The run moves on; a replay still answers what the first request got. Member order and
	// white space do not matter; the key's case does not either.
	a.exec(`UPDATE job_runs SET status = 'running', started_at = now() WHERE id = $1`, id)
	again := a.do("POST", "/v1/jobs/plan-change/runs", "{ \"params\": {\"dry_run\": true},\n \"reason\": \"r\" }",
		header{"Idempotency-Key": strings.ToUpper(key1)})
	require.Equal(t, http.StatusAccepted, again.Status)
	assert.Equal(t, string(first.Body), string(again.Body))
	assert.Equal(t, first.Header.Get("Location"), again.Header.Get("Location"))
	assert.Equal(t, "true", again.Header.Get("Idempotent-Replayed"))
	assert.Equal(t, 1, a.count(`SELECT count(*) FROM job_runs`))

	// Same key, other body: refused, nothing queued.
	a.exec(`UPDATE job_runs SET status = 'succeeded', finished_at = now() WHERE id = $1`, id)
	other := a.do("POST", "/v1/jobs/plan-change/runs", `{"reason":"other"}`, header{"Idempotency-Key": key1})
	require.Equal(t, http.StatusConflict, other.Status)
	assert.Equal(t, "idempotency-key-reused", other.problemType(t))
	assert.Equal(t, "Idempotency-Key", other.problemField(t))
	assert.Equal(t, 1, a.count(`SELECT count(*) FROM job_runs`))

	// An empty body hashes as {}.
	empty := a.do("POST", "/v1/jobs/plan-change/runs", "", header{"Idempotency-Key": key2})
	require.Equal(t, http.StatusAccepted, empty.Status)
	braces := a.do("POST", "/v1/jobs/plan-change/runs", "{}", header{"Idempotency-Key": key2})
	require.Equal(t, http.StatusAccepted, braces.Status)
	assert.Equal(t, string(empty.Body), string(braces.Body))

	// Keys are scoped by job: the same key on another job is a new request.
	otherJob := a.do("POST", "/v1/jobs/rounds-create/runs", `{"reason":"r","params":{"dry_run":true}}`, header{"Idempotency-Key": key1})
	require.Equal(t, http.StatusAccepted, otherJob.Status)
	assert.NotEqual(t, id, otherJob.JSON(t)["id"])
	assert.Equal(t, 3, a.count(`SELECT count(*) FROM job_runs`))

	// The answer is stored with the key.
	assert.Equal(t, 1, a.count(`SELECT count(*) FROM idempotency_keys WHERE key = $1 AND status = 'COMPLETED'
		AND response_status = 202 AND scope = 'POST /v1/jobs/{name}/runs:plan-change' AND expires_at > now() + interval '23 hours'`, key1))
}

func TestExpiredIdempotencyKeyIsNew(t *testing.T) {
	t.Parallel()
	a := newTestAPI(t)
	first := a.do("POST", "/v1/jobs/plan-change/runs", `{"reason":"a"}`, header{"Idempotency-Key": key1})
	require.Equal(t, http.StatusAccepted, first.Status)
	a.exec(`UPDATE job_runs SET status = 'succeeded', finished_at = now()`)
	a.exec(`UPDATE idempotency_keys SET expires_at = now() - interval '1 second'`)

	// Even with another body: the expired record is forgotten.
	second := a.do("POST", "/v1/jobs/plan-change/runs", `{"reason":"b"}`, header{"Idempotency-Key": key1})
	require.Equal(t, http.StatusAccepted, second.Status, "body: %s", second.Body)
	assert.NotEqual(t, first.JSON(t)["id"], second.JSON(t)["id"])
	assert.Equal(t, "b", second.JSON(t)["reason"])
	assert.Equal(t, 2, a.count(`SELECT count(*) FROM job_runs`))
	assert.Equal(t, 1, a.count(`SELECT count(*) FROM idempotency_keys WHERE expires_at > now()`))
}

// concurrently sends n copies of a request at once and returns the answers.
func concurrently(a *testAPI, n int, method, path, body string, h header) []response {
	out := make([]response, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			// As a client should, a request answered 503 (the database overloaded past the
			// query timeout on a busy test machine) is sent again after its Retry-After; what
			// the tests assert (one run, one key) must hold across such retries too.
			for try := 0; ; try++ {
				out[i] = a.do(method, path, body, h)
				if out[i].Status != http.StatusServiceUnavailable || try == 5 {
					break
				}
				time.Sleep(time.Second) // the answer's Retry-After
			}
		}()
	}
	close(start)
	wg.Wait()
	return out
}

func TestConcurrentTriggersWithOneKeyCreateOneRun(t *testing.T) {
	t.Parallel()
	a := newTestAPI(t)
	answers := concurrently(a, 50, "POST", "/v1/jobs/plan-change/runs", `{"reason":"once"}`, header{"Idempotency-Key": key1})
	for i, res := range answers {
		require.Equal(t, http.StatusAccepted, res.Status, "answer %d: %s", i, res.Body)
		assert.Equal(t, string(answers[0].Body), string(res.Body), "answer %d", i)
		assert.Equal(t, answers[0].Header.Get("Location"), res.Header.Get("Location"))
	}
	assert.Equal(t, 1, a.count(`SELECT count(*) FROM job_runs`))
	assert.Equal(t, 1, a.count(`SELECT count(*) FROM idempotency_keys`))
}

func TestConcurrentTriggersWithoutKeyWhileRunningCreateNoRun(t *testing.T) {
	t.Parallel()
	a := newTestAPI(t)
	res := a.do("POST", "/v1/jobs/plan-change/runs", "", nil)
	require.Equal(t, http.StatusAccepted, res.Status)
	id := res.JSON(t)["id"]
	a.exec(`UPDATE job_runs SET status = 'running', started_at = now() WHERE id = $1`, id)

	for i, res := range concurrently(a, 50, "POST", "/v1/jobs/plan-change/runs", "", nil) {
		require.Equal(t, http.StatusOK, res.Status, "answer %d: %s", i, res.Body)
		assert.Equal(t, id, res.JSON(t)["id"])
	}
	assert.Equal(t, 1, a.count(`SELECT count(*) FROM job_runs`))

	// From idle, 50 concurrent triggers queue one run: one 202, the others 200 with it.
	a.exec(`UPDATE job_runs SET status = 'succeeded', finished_at = now()`)
	answers := concurrently(a, 50, "POST", "/v1/jobs/plan-change/runs", "", nil)
	accepted := 0
	for _, res := range answers {
		if res.Status == http.StatusAccepted {
			accepted++
		} else {
			require.Equal(t, http.StatusOK, res.Status)
		}
		assert.Equal(t, answers[0].JSON(t)["id"], res.JSON(t)["id"])
	}
	assert.Equal(t, 1, accepted)
	assert.Equal(t, 2, a.count(`SELECT count(*) FROM job_runs`))
}

// engine plays the leader's part for one queued run of job: once the run exists it marks it
// running and sends its id, then finishes it with status when release is closed. (It runs
// in its own goroutine, so it reports failures with Errorf, not require.)
func (a *testAPI) engine(job, status string, release <-chan struct{}) chan int64 {
	started := make(chan int64, 1)
	a.exec(`UPDATE scheduler_leader SET epoch = 7, instance_id = 'leader-1', since = now()`)
	go func() {
		defer close(started)
		var id int64
		deadline := time.Now().Add(10 * time.Second)
		for {
			err := a.db.Pool.QueryRow(context.Background(), `
				UPDATE job_runs SET status = 'running', started_at = now(), instance_id = 'leader-1', epoch = 7
				WHERE job = $1 AND status = 'queued' RETURNING id`, job).Scan(&id)
			if err == nil {
				break
			}
			if time.Now().After(deadline) {
				a.t.Errorf("engine: no queued run of %s appeared: %v", job, err)
				return
			}
			time.Sleep(5 * time.Millisecond) // polling the database, as the engine's fallback does
		}
		started <- id
		<-release
		// Finished as the engine does, which announces it to the waiting requests.
		err := a.db.Fenced(context.Background(), store.Fence{Epoch: 7}, func(tx *store.Tx) error {
			return tx.FinishRun(context.Background(), id, status, json.RawMessage(`{"processed": 3, "changed": 2}`), nil, nil)
		})
		if err != nil {
			a.t.Errorf("engine: finish run %d: %v", id, err)
		}
	}()
	return started
}

func TestTriggerWaitAnswersTheFinishedRun(t *testing.T) {
	t.Parallel()
	a := newTestAPI(t)
	release := make(chan struct{})
	started := a.engine("plan-change", "succeeded", release)
	done := make(chan response, 1)
	go func() { done <- a.do("POST", "/v1/jobs/plan-change/runs?wait=30s", "", nil) }()
	require.NotZero(t, receive(t, started, 10*time.Second, "the run to start"))
	select {
	case res := <-done:
		t.Fatalf("answered before the run finished: %d %s", res.Status, res.Body)
	default:
	}
	close(release)
	res := receive(t, done, 40*time.Second, "the waiting trigger to answer")
	require.Equal(t, http.StatusOK, res.Status, "body: %s", res.Body)
	run := res.JSON(t)
	assert.Equal(t, "succeeded", run["status"])
	assert.Equal(t, "leader-1", run["instance_id"])
	assert.Equal(t, float64(7), run["epoch"])
	assert.Equal(t, float64(2), run["stats"].(map[string]any)["changed"])
	assert.NotNil(t, run["duration_ms"])

	// Nobody runs it: the wait expires and the answer is 202 with the queued run.
	res = a.do("POST", "/v1/jobs/rounds-create/runs?wait=50ms", "", nil)
	require.Equal(t, http.StatusAccepted, res.Status)
	assert.Equal(t, "queued", res.JSON(t)["status"])
}

// A waiting trigger is woken by the cancel of its queued run (its notification), not by a
// re-read: the test server re-reads only hourly.
func TestTriggerWaitEndsWithTheCancelOfItsRun(t *testing.T) {
	t.Parallel()
	a := newTestAPI(t)
	done := make(chan response, 1)
	go func() { done <- a.do("POST", "/v1/jobs/rounds-create/runs?wait=30s", "", nil) }()
	var id int64
	require.Eventually(t, func() bool {
		return a.db.Pool.QueryRow(context.Background(), `SELECT id FROM job_runs WHERE job = 'rounds-create'`).Scan(&id) == nil
	}, 10*time.Second, 5*time.Millisecond)
	res := a.do("POST", fmt.Sprintf("/v1/runs/%d/cancel", id), "", nil)
	require.Equal(t, http.StatusOK, res.Status, "body: %s", res.Body)
	select {
	case res := <-done:
		require.Equal(t, http.StatusOK, res.Status, "body: %s", res.Body)
		assert.Equal(t, "cancelled", res.JSON(t)["status"])
	case <-time.After(10 * time.Second):
		t.Fatal("the waiting trigger did not answer after its run was cancelled")
	}
}

// A finish nobody announced (written without the store, as a lost notification looks) is
// still found by the periodic re-read, well before the wait's deadline.
func TestWaitRechecksWithoutNotification(t *testing.T) {
	t.Parallel()
	a := newTestAPI(t)
	a.server.waitRecheck = 20 * time.Millisecond
	done := make(chan response, 1)
	go func() { done <- a.do("POST", "/v1/jobs/rounds-create/runs?wait=30s", "", nil) }()
	require.Eventually(t, func() bool {
		tag, err := a.db.Pool.Exec(context.Background(), `
			UPDATE job_runs SET status = 'succeeded', started_at = now(), finished_at = now()
			WHERE job = 'rounds-create' AND status = 'queued'`)
		return err == nil && tag.RowsAffected() == 1
	}, 10*time.Second, 5*time.Millisecond)
	select {
	case res := <-done:
		require.Equal(t, http.StatusOK, res.Status, "body: %s", res.Body)
		assert.Equal(t, "succeeded", res.JSON(t)["status"])
	case <-time.After(10 * time.Second):
		t.Fatal("the waiting trigger did not find the finished run")
	}
}

func TestTriggerWaitHonoursClientDisconnect(t *testing.T) {
	t.Parallel()
	a := newTestAPI(t)
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		req, _ := http.NewRequestWithContext(ctx, "POST", a.http.URL+"/v1/jobs/plan-change/runs?wait=5m", nil)
		req.Header.Set("Authorization", "Bearer "+testToken)
		req.Header.Set("Idempotency-Key", key1)
		_, err := a.http.Client().Do(req)
		errc <- err
	}()
	require.Eventually(t, func() bool { return a.count(`SELECT count(*) FROM job_runs`) == 1 }, 10*time.Second, 5*time.Millisecond)
	cancel()
	require.Error(t, <-errc)
	// The handler stops waiting and stores the answer it would have sent, so the retry
	// replays it instead of finding the key in progress for 5 minutes.
	require.Eventually(t, func() bool {
		return a.count(`SELECT count(*) FROM idempotency_keys WHERE status = 'COMPLETED' AND response_status = 202`) == 1
	}, 10*time.Second, 5*time.Millisecond)
	res := a.do("POST", "/v1/jobs/plan-change/runs?wait=5m", "", header{"Idempotency-Key": key1})
	require.Equal(t, http.StatusAccepted, res.Status)
	assert.Equal(t, "queued", res.JSON(t)["status"])
}

func TestIdempotentWaitingTrigger(t *testing.T) {
	t.Parallel()
	a := newTestAPI(t)
	release := make(chan struct{})
	started := a.engine("plan-change", "failed", release)
	done := make(chan response, 1)
	go func() {
		done <- a.do("POST", "/v1/jobs/plan-change/runs?wait=30s", `{"reason":"w"}`, header{"Idempotency-Key": key1})
	}()
	require.NotZero(t, receive(t, started, 10*time.Second, "the run to start"))

	// While the first request waits, a duplicate learns it is in progress.
	dup := a.do("POST", "/v1/jobs/plan-change/runs?wait=30s", `{"reason":"w"}`, header{"Idempotency-Key": key1})
	require.Equal(t, http.StatusConflict, dup.Status)
	assert.Equal(t, "idempotency-key-in-progress", dup.problemType(t))
	assert.Equal(t, "1", dup.Header.Get("Retry-After"))

	close(release)
	first := receive(t, done, 40*time.Second, "the waiting trigger to answer")
	require.Equal(t, http.StatusOK, first.Status, "body: %s", first.Body)
	assert.Equal(t, "failed", first.JSON(t)["status"])

	// Afterwards the key replays the answer the first request got.
	replay := a.do("POST", "/v1/jobs/plan-change/runs", `{"reason":"w"}`, header{"Idempotency-Key": key1})
	require.Equal(t, http.StatusOK, replay.Status)
	assert.Equal(t, string(first.Body), string(replay.Body))
	assert.Equal(t, 1, a.count(`SELECT count(*) FROM job_runs`))
}

func TestStalePendingKeyAnswersWithItsRun(t *testing.T) {
	t.Parallel()
	a := newTestAPI(t)
	// A replica claimed the key, queued the run and died while waiting: the key is PENDING,
	// older than any wait, and names its run.
	res := a.do("POST", "/v1/jobs/plan-change/runs", "", nil)
	require.Equal(t, http.StatusAccepted, res.Status)
	id := int64(res.JSON(t)["id"].(float64))
	a.exec(`UPDATE job_runs SET status = 'succeeded', started_at = now(), finished_at = now() WHERE id = $1`, id)
	a.exec(`INSERT INTO idempotency_keys (key, scope, request_hash, response_json, created_at, expires_at)
		VALUES ($1, 'POST /v1/jobs/{name}/runs:plan-change', $2, jsonb_build_object('run_id', $3::int8),
		        now() - interval '7 minutes', now() + interval '1 day')`, key1, requestHash(nil), id)

	res = a.do("POST", "/v1/jobs/plan-change/runs", "", header{"Idempotency-Key": key1})
	require.Equal(t, http.StatusOK, res.Status, "body: %s", res.Body)
	assert.Equal(t, float64(id), res.JSON(t)["id"])
	assert.Equal(t, "succeeded", res.JSON(t)["status"])
	assert.Equal(t, 1, a.count(`SELECT count(*) FROM job_runs`), "no second run")
	assert.Equal(t, 1, a.count(`SELECT count(*) FROM idempotency_keys WHERE status = 'COMPLETED' AND response_status = 200`))

	again := a.do("POST", "/v1/jobs/plan-change/runs", "", header{"Idempotency-Key": key1})
	assert.Equal(t, string(res.Body), string(again.Body))
}
