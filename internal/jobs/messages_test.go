package jobs_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schedulerhq/scheduler/internal/jobcontract"
	"github.com/schedulerhq/scheduler/internal/jobs"
	"github.com/schedulerhq/scheduler/internal/store"
	"github.com/schedulerhq/scheduler/internal/testdb"
)

// receiver is a webhook receiver that counts deliveries per Idempotency-Key and the sends in
// flight at once. With a gate, each request waits until gate requests are in flight together
// (or 5 s pass), so that the pipeline's concurrency shows in maxInFlight whatever the
// machine's speed; with hold, each request waits until hold is closed.
type receiver struct {
	*httptest.Server
	gate int
	hold chan struct{}
	full chan struct{} // closed once gate requests were in flight together

	mu          sync.Mutex
	inFlight    int
	maxInFlight int
	keys        map[string]int
	badKeys     int
}

func newReceiver(t *testing.T, gate int, hold chan struct{}) *receiver {
	r := &receiver{gate: gate, hold: hold, keys: map[string]int{}, full: make(chan struct{})}
	r.Server = httptest.NewServer(http.HandlerFunc(r.serve))
	t.Cleanup(r.Close)
	return r
}

func (r *receiver) serve(w http.ResponseWriter, req *http.Request) {
	body, _ := io.ReadAll(req.Body)
	var m jobs.Message
	_ = json.Unmarshal(body, &m)
	key := req.Header.Get("Idempotency-Key")
	r.mu.Lock()
	if len(m.Deployment) != 36 || key != fmt.Sprintf("message-delivery-%s-%d", m.Deployment, m.DeliveryID) {
		r.badKeys++
	}
	r.keys[key]++
	r.inFlight++
	r.maxInFlight = max(r.maxInFlight, r.inFlight)
	if r.inFlight == r.gate {
		select {
		case <-r.full:
		default:
			close(r.full)
		}
	}
	r.mu.Unlock()
	switch {
	case r.hold != nil:
		<-r.hold
	case r.gate > 0:
		select {
		case <-r.full:
		case <-time.After(5 * time.Second):
		}
	}
	r.mu.Lock()
	r.inFlight--
	r.mu.Unlock()
	_, _ = w.Write([]byte(`{"id":"rcv-` + key + `"}`))
}

// testDrafts are n test messages, numbered from first.
func testDrafts(first, n int) []jobs.Draft {
	drafts := make([]jobs.Draft, n)
	for i := range drafts {
		drafts[i] = jobs.Draft{Channel: "EMAIL", To: fmt.Sprintf("c%d@example.com", first+i), Template: "test",
			Payload: map[string]any{"n": first + i, "kind": "test"}}
	}
	return drafts
}

// claim claims drafts in one fenced transaction.
func claim(t *testing.T, env *jobcontract.Env, pipe *jobs.Pipeline, drafts []jobs.Draft) []jobs.Message {
	t.Helper()
	var msgs []jobs.Message
	require.NoError(t, env.Tx(context.Background(), func(tx pgx.Tx) error {
		var err error
		msgs, err = pipe.Claim(context.Background(), tx, drafts)
		return err
	}))
	return msgs
}

func webhook(url string) *jobs.WebhookSender {
	return jobs.NewWebhookSender(jobs.WebhookSettings{URL: url, MaxAttempts: 1})
}

func TestPipelineKeepsToItsConcurrency(t *testing.T) {
	t.Parallel()
	db, _ := testdb.Open(t, store.Options{})
	env := newEnv(t, db, "pipeline-test")
	const concurrency = 4
	rcv := newReceiver(t, concurrency, nil)
	pipe := jobs.NewPipeline(webhook(rcv.URL), jobs.SendSettings{Concurrency: concurrency})
	out := pipe.Open(context.Background(), env, jobs.Hooks{})
	for i := range 3 {
		out.Send(claim(t, env, pipe, testDrafts(i*4*concurrency, 4*concurrency))...)
	}
	st, err := out.Close()
	require.NoError(t, err)
	assert.EqualValues(t, 12*concurrency, st.Detail["sent"])
	assert.Equal(t, concurrency, rcv.maxInFlight, "the receiver saw exactly the concurrency in flight, never more")
	assert.Equal(t, map[string]int{"SENT": 12 * concurrency}, deliveries(t, db.Pool))
	assert.Zero(t, rcv.badKeys, "every request carries Idempotency-Key: message-delivery-<deployment>-<id>")
	for key, n := range rcv.keys {
		assert.Equal(t, 1, n, key)
	}
}

func TestPipelineKeepsToItsRate(t *testing.T) {
	t.Parallel()
	db, _ := testdb.Open(t, store.Options{})
	env := newEnv(t, db, "pipeline-test")
	rcv := newReceiver(t, 0, nil)
	// 20 messages/s with a burst of 4 (the concurrency): 24 messages take at least 1 s.
	pipe := jobs.NewPipeline(webhook(rcv.URL), jobs.SendSettings{Concurrency: 4, Rate: 20})
	msgs := claim(t, env, pipe, testDrafts(0, 24))
	out := pipe.Open(context.Background(), env, jobs.Hooks{})
	start := time.Now()
	out.Send(msgs...)
	elapsed := time.Since(start)
	st, err := out.Close()
	require.NoError(t, err)
	assert.EqualValues(t, 24, st.Detail["sent"])
	assert.GreaterOrEqual(t, elapsed, 950*time.Millisecond, "(24 - burst 4) / 20 per second")
}

func TestPipelineCancelledMidWaveGivesBackUnsentAndRecordsWhatLeft(t *testing.T) {
	t.Parallel()
	db, _ := testdb.Open(t, store.Options{})
	env := newEnv(t, db, "pipeline-test")
	const concurrency = 4
	hold := make(chan struct{})
	rcv := newReceiver(t, concurrency, hold)
	pipe := jobs.NewPipeline(webhook(rcv.URL), jobs.SendSettings{Concurrency: concurrency})
	msgs := claim(t, env, pipe, testDrafts(0, 20))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var released []jobs.Message
	out := pipe.Open(ctx, env, jobs.Hooks{OnRelease: func(_ context.Context, _ pgx.Tx, r []jobs.Message) error {
		released = r
		return nil
	}})
	go func() {
		// Once the first wave is at the receiver, the run is cancelled (timeout, cancel
		// request, lost leadership), and only then does the receiver answer.
		<-rcv.full
		cancel()
		close(hold)
	}()
	out.Send(msgs...)
	st, err := out.Close()
	require.NoError(t, err, "the outcomes are recorded although the run's context is done")
	assert.EqualValues(t, concurrency, st.Detail["sent"])
	assert.EqualValues(t, 20-concurrency, st.Detail["released"])
	assert.Len(t, released, 20-concurrency, "the job's release hook saw the claims given back")
	assert.Equal(t, concurrency, len(rcv.keys), "no send started after the cancellation")
	assert.Equal(t, map[string]int{"SENT": concurrency}, deliveries(t, db.Pool),
		"sent messages recorded, unsent claims deleted so the next run claims them afresh")
	assert.Len(t, claim(t, env, pipe, testDrafts(0, 20)), 20-concurrency,
		"a later run claims the given-back messages again, never the sent ones")
}

func TestThreeRacingPipelinesSendEachMessageOnce(t *testing.T) {
	t.Parallel()
	db, _ := testdb.Open(t, store.Options{})
	ids := seedLeads(t, db.Pool, 300)
	rcv := newReceiver(t, 0, nil)
	env := newEnv(t, db, "abandon-recovery")
	// Three replicas' copies of the job, each with its own pipeline, released together.
	runs := make([]jobcontract.Job, 3)
	for i := range runs {
		runs[i] = jobs.NewAbandonRecovery(jobs.AbandonSettings{Delay: abandonDelay, BatchSize: 25},
			jobs.NewPipeline(webhook(rcv.URL), jobs.SendSettings{Concurrency: 8}))
	}
	stats := make([]jobcontract.Stats, len(runs))
	errs := make([]error, len(runs))
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i, j := range runs {
		wg.Go(func() {
			<-start
			stats[i], errs[i] = j.Run(context.Background(), env)
		})
	}
	close(start)
	wg.Wait()
	var sent int64
	for i := range runs {
		require.NoError(t, errs[i], "run %d", i)
		sent += stats[i].Detail["sent"]
	}
	t.Logf("sent per run: %d, %d, %d", stats[0].Detail["sent"], stats[1].Detail["sent"], stats[2].Detail["sent"])
	assert.EqualValues(t, len(ids), sent)
	assert.Len(t, rcv.keys, len(ids), "every lead's message reached the receiver")
	for key, n := range rcv.keys {
		assert.Equal(t, 1, n, "%s delivered once", key)
	}
	assert.Zero(t, rcv.badKeys)
	assert.Equal(t, map[string]int{"SENT": len(ids)}, deliveries(t, db.Pool))
}

func TestPipelineLeavesASendCutOffByTheCancellationPending(t *testing.T) {
	t.Parallel()
	db, _ := testdb.Open(t, store.Options{})
	env := newEnv(t, db, "pipeline-test")
	// A receiver that never answers: the send is still in flight when the run is cancelled,
	// and is cut off once the grace for sends in flight has run out.
	arrived := make(chan struct{}, 1)
	done := make(chan struct{})
	stuck := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.ReadAll(r.Body) // read, so that the server notices the client hanging up
		select {
		case arrived <- struct{}{}:
		default:
		}
		select {
		case <-r.Context().Done():
		case <-done:
		}
	}))
	defer stuck.Close()
	defer close(done)
	pipe := jobs.NewPipeline(webhook(stuck.URL), jobs.SendSettings{Concurrency: 1})
	msgs := claim(t, env, pipe, testDrafts(0, 3))
	ctx, cancel := context.WithCancel(context.Background())
	out := pipe.Open(ctx, env, jobs.Hooks{})
	go func() {
		<-arrived
		cancel()
	}()
	out.Send(msgs...)
	st, err := out.Close()
	require.NoError(t, err)
	assert.EqualValues(t, 1, st.Detail["unknown"], "the message in flight may or may not have gone out")
	assert.EqualValues(t, 2, st.Detail["released"])
	assert.Zero(t, st.Detail["failed"], "a send cut off is not recorded as refused")
	assert.Equal(t, map[string]int{"PENDING": 1}, deliveries(t, db.Pool),
		"left PENDING for Reclaim, which resends it only through an idempotent provider")
}

// A cancellation that lands while outcomes are being recorded must not lose them: the
// record is written again in a fresh bounded transaction, still fenced.
func TestPipelineRecordsOutcomesWhenCancelledDuringTheRecord(t *testing.T) {
	t.Parallel()
	db, _ := testdb.Open(t, store.Options{})
	env := newEnv(t, db, "pipeline-test")
	rcv := newReceiver(t, 0, nil)
	pipe := jobs.NewPipeline(webhook(rcv.URL), jobs.SendSettings{Concurrency: 1})
	msgs := claim(t, env, pipe, testDrafts(0, 1))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// The hook runs inside the record transaction: the run is cancelled before it commits.
	out := pipe.Open(ctx, env, jobs.Hooks{OnSent: func(context.Context, pgx.Tx, []jobs.Message) error {
		cancel()
		return nil
	}})
	out.Send(msgs...)
	st, err := out.Close()
	require.NoError(t, err)
	assert.EqualValues(t, 1, st.Detail["sent"])
	assert.Zero(t, st.Detail["unrecorded"])
	assert.Equal(t, map[string]int{"SENT": 1}, deliveries(t, db.Pool), "the known outcome is recorded")
}

// slowSender takes a few milliseconds per send, so that outcomes trickle in.
type slowSender struct{}

func (slowSender) Provider() string { return "slow" }
func (slowSender) Idempotent() bool { return false }
func (slowSender) Send(context.Context, jobs.Message) (string, error) {
	time.Sleep(2 * time.Millisecond) // the provider's latency, not a synchronisation
	return "", nil
}

// A wave of sends is recorded in a few transactions, not one per handful of outcomes: the
// recorder waits for the sends still in flight (up to a bound) before it records.
func TestPipelineRecordsAWaveInFewTransactions(t *testing.T) {
	t.Parallel()
	db, _ := testdb.Open(t, store.Options{})
	env := newEnv(t, db, "pipeline-test")
	const concurrency, n = 2, 40
	pipe := jobs.NewPipeline(slowSender{}, jobs.SendSettings{Concurrency: concurrency})
	out := pipe.Open(context.Background(), env, jobs.Hooks{})
	out.Send(claim(t, env, pipe, testDrafts(0, n))...)
	st, err := out.Close()
	require.NoError(t, err)
	assert.EqualValues(t, n, st.Detail["sent"])
	assert.Equal(t, map[string]int{"SENT": n}, deliveries(t, db.Pool))
	// One when the wave (about 40 ms) takes under the recorder's wait bound; a slow machine
	// may split it.
	assert.LessOrEqual(t, st.Detail["record_batches"], int64(3),
		"%d outcomes trickling in %d at a time were recorded in %d transactions", n, concurrency, st.Detail["record_batches"])
}
