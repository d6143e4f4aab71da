package engine

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schedulerhq/scheduler/internal/notify"
	"github.com/schedulerhq/scheduler/internal/notify/deliver"
	"github.com/schedulerhq/scheduler/internal/store"
	"github.com/schedulerhq/scheduler/internal/store/storetest"
	"github.com/schedulerhq/scheduler/internal/targets"
)

// The signing secret of the tests' notification webhooks, in the Standard Webhooks form.
var notifyKey = []byte("a key of the tests' own, 32 bytes")

var notifySecretValue = "whsec_" + base64.StdEncoding.EncodeToString(notifyKey)

// notifications builds a node's delivery of notifications: a caller behind a guard allowing
// allow, the secret HOOK_SIGNING, the coalescing interval and an attempt timeout.
func notifications(interval, attempt time.Duration, allow ...string) func(db *store.DB) *deliver.Service {
	return func(db *store.DB) *deliver.Service {
		g, err := targets.NewGuard(allow)
		if err != nil {
			panic(err)
		}
		return deliver.New(deliver.Config{DB: db, Caller: targets.NewCaller(targets.Config{Guard: g}),
			Interval: interval, AttemptTimeout: attempt, PublicURL: "https://scheduler.example.com",
			Secret: func(_ context.Context, _, name string) (string, []string, error) {
				if name == "HOOK_SIGNING" {
					return notifySecretValue, nil, nil
				}
				return "", nil, fmt.Errorf("secret %s is not set", name)
			}})
	}
}

// heard is one notification a hook received.
type heard struct {
	id, timestamp, signature string
	body                     []byte
	msg                      notify.Message
	at                       time.Time
}

// hook records the notifications it receives; each arrival is also sent on arrived.
type hook struct {
	mu      sync.Mutex
	heard   []heard
	arrived chan heard
}

func newHook(t *testing.T) (*hook, *httptest.Server) {
	h := &hook{arrived: make(chan heard, 100)}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return h, srv
}

func (h *hook) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	m := heard{id: r.Header.Get("webhook-id"), timestamp: r.Header.Get("webhook-timestamp"),
		signature: r.Header.Get("webhook-signature"), body: body, at: time.Now()}
	_ = json.Unmarshal(body, &m.msg)
	h.mu.Lock()
	h.heard = append(h.heard, m)
	h.mu.Unlock()
	select {
	case h.arrived <- m:
	default:
	}
}

func (h *hook) all() []heard {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.heard)
}

// await waits for a message of type typ.
func (h *hook) await(t *testing.T, typ string, within time.Duration) heard {
	t.Helper()
	deadline := time.After(within)
	for {
		select {
		case m := <-h.arrived:
			if m.msg.Type == typ {
				return m
			}
		case <-deadline:
			t.Fatalf("no %s notification within %s; heard %d", typ, within, len(h.all()))
		}
	}
}

// validSignature verifies a notification as a receiver does (docs/runtime-jobs.md).
func validSignature(m heard) bool {
	sec, err := strconv.ParseInt(m.timestamp, 10, 64)
	if err != nil || time.Since(time.Unix(sec, 0)).Abs() > 5*time.Minute {
		return false
	}
	mac := hmac.New(sha256.New, notifyKey)
	fmt.Fprintf(mac, "%s.%s.", m.id, m.timestamp)
	mac.Write(m.body)
	want := "v1," + base64.StdEncoding.EncodeToString(mac.Sum(nil))
	for _, sig := range strings.Fields(m.signature) {
		if hmac.Equal([]byte(sig), []byte(want)) {
			return true
		}
	}
	return false
}

// failing answers 500 to every call: the target of a job that fails.
func failing(t *testing.T) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusInternalServerError)
	}))
	t.Cleanup(srv.Close)
	return srv
}

func runIDs(m notify.Message) []int64 {
	ids := make([]int64, len(m.Runs))
	for i, r := range m.Runs {
		ids[i] = r.ID
	}
	return ids
}

// A storm is coalesced: a job that fails ten times in a row within one interval (and then
// pauses itself) makes one job.failed message with count 10 listing all ten runs, signed,
// and one job.paused message naming the run that paused it.
func TestNotificationStormIsOneMessage(t *testing.T) {
	t.Parallel()
	db, url := newDB(t)
	target := failing(t)
	h, srv := newHook(t)
	n := startNode(t, url, "a", nodeOptions{runtime: runtimeFor(t, "127.0.0.1/32"), pollInterval: 200 * time.Millisecond,
		notifications: notifications(12*time.Second, time.Second, "127.0.0.1/32")})
	awaitSignal(t, &n.en.testSignals.leading, "leading")
	createDefinition(t, db, `{"name": "stormy", "schedule": "@every 1s", "pause_after_failures": 10,
		"retry": {"max_attempts": 1}, "http": {"url": "`+target.URL+`"},
		"notify": [{"on": ["failed", "paused"], "webhook": {"url": "`+srv.URL+`/hook", "signing_secret": "HOOK_SIGNING"}}]}`)

	failed := h.await(t, "job.failed", 40*time.Second)
	paused := h.await(t, "job.paused", 10*time.Second)

	var want []int64
	rows, err := db.Pool.Query(context.Background(), `SELECT id FROM job_runs WHERE job = 'stormy' AND status = 'failed' ORDER BY id`)
	require.NoError(t, err)
	for rows.Next() {
		var id int64
		require.NoError(t, rows.Scan(&id))
		want = append(want, id)
	}
	require.NoError(t, rows.Err())
	require.Len(t, want, 10, "the job failed ten times, then paused itself")
	assert.Equal(t, 10, failed.msg.Count)
	assert.Equal(t, want, runIDs(failed.msg), "the one message lists every failed run")
	assert.Equal(t, "stormy", failed.msg.Job)
	assert.Equal(t, "default", failed.msg.Namespace)
	assert.Equal(t, "https://scheduler.example.com/ui/#/jobs/stormy", failed.msg.ConsoleURL)
	for _, r := range failed.msg.Runs {
		require.NotNil(t, r.Error)
		assert.Contains(t, *r.Error, "status 500")
		assert.Equal(t, store.StatusFailed, r.Status)
	}
	assert.Equal(t, []int64{want[9]}, runIDs(paused.msg), "the pause names the run that made it")
	assert.Len(t, paused.msg.Reasons, 1)
	for _, m := range []heard{failed, paused} {
		assert.True(t, validSignature(m), "%s is signed", m.msg.Type)
	}
	assert.NotEqual(t, failed.id, paused.id, "each message has its own webhook-id")
	assert.Equal(t, 2, len(h.all()), "nothing else was sent")
	assert.Equal(t, 10, count(t, db, `SELECT count(*) FROM scheduler_notifications WHERE job = 'stormy' AND event = 'failed'`),
		"one event per failed run")
}

// A notification URL on a private address that the guard does not allow (a definition
// written before an operator narrowed SCHEDULER_HTTP_ALLOW) is refused at send: no
// connection is made, and the message is recorded failed with the refusal.
func TestNotificationToAPrivateAddressIsRefusedAtSend(t *testing.T) {
	t.Parallel()
	db, url := newDB(t)
	h, srv := newHook(t)
	target := failing(t)
	n := startNode(t, url, "a", nodeOptions{runtime: runtimeFor(t, "127.0.0.1/32"), pollInterval: 200 * time.Millisecond,
		notifications: notifications(time.Second, time.Second)}) // the guard allows nothing
	awaitSignal(t, &n.en.testSignals.leading, "leading")
	createDefinition(t, db, `{"name": "sneaky", "schedule": "0 0 1 1 *", "retry": {"max_attempts": 1}, "http": {"url": "`+target.URL+`"},
		"notify": [{"on": ["failed"], "webhook": {"url": "`+srv.URL+`"}}]}`)
	awaitSignal(t, &n.en.testSignals.definitionLoaded, "loaded")
	awaitStatus(t, db, queueRun(t, db, "sneaky"), store.StatusFailed)

	require.Eventually(t, func() bool {
		return count(t, db, `SELECT count(*) FROM scheduler_notification_deliveries WHERE job = 'sneaky' AND status = 'failed'`) == 1
	}, waitTimeout, 20*time.Millisecond, "the message is given up at once")
	var lastError string
	var attempts int
	require.NoError(t, db.Pool.QueryRow(context.Background(),
		`SELECT last_error, attempts FROM scheduler_notification_deliveries WHERE job = 'sneaky'`).Scan(&lastError, &attempts))
	assert.Contains(t, lastError, "SCHEDULER_HTTP_ALLOW")
	assert.Equal(t, 1, attempts, "a refused address is not retried")
	assert.Empty(t, h.all(), "no connection reached the private address")
}

// A job's messages go through its namespace's guard: where the operator's list allows the
// hook's address but the namespace's http_allow does not, the message is refused at send.
func TestNotificationGoesThroughItsNamespacesGuard(t *testing.T) {
	t.Parallel()
	db, url := newDB(t)
	h, srv := newHook(t)
	target := failing(t)
	n := startNode(t, url, "a", nodeOptions{runtime: runtimeFor(t, "127.0.0.1/32"), pollInterval: 200 * time.Millisecond,
		notifications: func(db *store.DB) *deliver.Service {
			g, err := targets.NewGuard([]string{"127.0.0.1/32"})
			if err != nil {
				panic(err)
			}
			return deliver.New(deliver.Config{DB: db, Caller: targets.NewCaller(targets.Config{Guard: g}),
				Interval: time.Second, AttemptTimeout: time.Second,
				Guard: func(_ context.Context, ns string) (*targets.Guard, error) { return g.Narrow(ns, nil) }})
		}})
	awaitSignal(t, &n.en.testSignals.leading, "leading")
	createDefinition(t, db, `{"name": "hooked", "schedule": "0 0 1 1 *", "retry": {"max_attempts": 1}, "http": {"url": "`+target.URL+`"},
		"notify": [{"on": ["failed"], "webhook": {"url": "`+srv.URL+`"}}]}`)
	awaitSignal(t, &n.en.testSignals.definitionLoaded, "loaded")
	awaitStatus(t, db, queueRun(t, db, "hooked"), store.StatusFailed)

	require.Eventually(t, func() bool {
		return count(t, db, `SELECT count(*) FROM scheduler_notification_deliveries WHERE job = 'hooked' AND status = 'failed'`) == 1
	}, waitTimeout, 20*time.Millisecond, "the message is given up at once")
	var lastError string
	require.NoError(t, db.Pool.QueryRow(context.Background(),
		`SELECT last_error FROM scheduler_notification_deliveries WHERE job = 'hooked'`).Scan(&lastError))
	assert.Contains(t, lastError, "an admin can allow it in namespace default's http_allow")
	assert.Empty(t, h.all(), "no connection reached the private address")
}

// A hostile receiver — one that never answers, one that answers without end, one that
// redirects — cannot stall the leader or another job's notifications: the good receiver
// hears within the interval and a second, the redirect is not followed, the endless answer
// is cut, the silent one times out and is retried later, and the leader's runs go on.
func TestHostileReceiversStallNothing(t *testing.T) {
	t.Parallel()
	db, url := newDB(t)
	target := failing(t)
	good, goodSrv := newHook(t)
	var stolen sync.Map
	thief := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { stolen.Store(r.URL.Path, true) }))
	t.Cleanup(thief.Close)
	release := make(chan struct{})
	hostile := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/silent": // holds the request until the attempt's timeout or the test's end
			_, _ = io.Copy(io.Discard, r.Body) // then the server notices the client hanging up
			select {
			case <-r.Context().Done():
			case <-release:
			}
		case "/endless": // a 200 whose body never ends
			w.WriteHeader(http.StatusOK)
			chunk := []byte(strings.Repeat("x", 64<<10))
			for r.Context().Err() == nil {
				if _, err := w.Write(chunk); err != nil {
					return
				}
			}
		case "/redirect":
			http.Redirect(w, r, thief.URL+"/stolen", http.StatusTemporaryRedirect)
		}
	}))
	t.Cleanup(hostile.Close)
	t.Cleanup(func() { close(release) }) // before Close, which waits for the silent handler

	n := startNode(t, url, "a", nodeOptions{runtime: runtimeFor(t, "127.0.0.1/32"), pollInterval: 200 * time.Millisecond,
		notifications: notifications(time.Second, 2*time.Second, "127.0.0.1/32")})
	awaitSignal(t, &n.en.testSignals.leading, "leading")
	for _, j := range []struct{ name, hook string }{
		{"to-silent", hostile.URL + "/silent"}, {"to-endless", hostile.URL + "/endless"},
		{"to-redirect", hostile.URL + "/redirect"},
	} {
		createDefinition(t, db, `{"name": "`+j.name+`", "schedule": "0 0 1 1 *", "retry": {"max_attempts": 1}, "http": {"url": "`+target.URL+`"},
			"notify": [{"on": ["failed"], "webhook": {"url": "`+j.hook+`"}}]}`)
		awaitSignal(t, &n.en.testSignals.definitionLoaded, "loaded")
		awaitStatus(t, db, queueRun(t, db, j.name), store.StatusFailed)
	}
	// The hostile messages are made first; the good one after them.
	require.Eventually(t, func() bool {
		return count(t, db, `SELECT count(*) FROM scheduler_notification_deliveries`) == 3
	}, waitTimeout, 20*time.Millisecond, "the hostile messages are made")
	createDefinition(t, db, `{"name": "to-good", "schedule": "@every 1s", "retry": {"max_attempts": 1}, "http": {"url": "`+target.URL+`"},
		"notify": [{"on": ["failed"], "webhook": {"url": "`+goodSrv.URL+`"}}]}`)
	start := time.Now()
	m := good.await(t, "job.failed", 10*time.Second)
	assert.Less(t, time.Since(start), 5*time.Second, "the good receiver heard within the interval and a few seconds")
	assert.Equal(t, "to-good", m.msg.Job)

	require.Eventually(t, func() bool {
		return count(t, db, `SELECT count(*) FROM scheduler_notification_deliveries WHERE job = 'to-redirect' AND status = 'failed' AND last_error LIKE '%redirect%not followed%'`) == 1 &&
			count(t, db, `SELECT count(*) FROM scheduler_notification_deliveries WHERE job = 'to-endless' AND status = 'sent'`) == 1 &&
			count(t, db, `SELECT count(*) FROM scheduler_notification_deliveries WHERE job = 'to-silent' AND status = 'pending' AND last_error LIKE '%timed out%'`) == 1
	}, waitTimeout, 50*time.Millisecond, "the redirect failed, the endless answer was cut, the silent one timed out and waits for its retry")
	_, followed := stolen.Load("/stolen")
	assert.False(t, followed, "the redirect was not followed")
	// The leader kept running the job's slots meanwhile.
	assert.GreaterOrEqual(t, count(t, db, `SELECT count(*) FROM job_runs WHERE job = 'to-good' AND status = 'failed'`), 2)
}

// Missed slots recorded by catch-up are notified, one event per missed row, committed with
// the rows.
func TestMissedSlotsAreNotifiedOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, url := newDB(t)
	h, srv := newHook(t)
	createDefinition(t, db, `{"name": "hourly", "schedule": "@every 1h", "catchup": "0s", "http": {"url": "`+srv.URL+`"},
		"notify": [{"on": ["missed"], "webhook": {"url": "`+srv.URL+`/hook"}}]}`)
	// The job existed five hours ago and ran then; nobody led since.
	_, err := db.Pool.Exec(ctx, `UPDATE job_definitions SET created_at = now() - interval '6 hours', updated_at = now() - interval '6 hours'`)
	require.NoError(t, err)
	s := time.Now().Add(-5 * time.Hour).Truncate(time.Hour)
	storetest.Run(ctx, t, db.Pool, storetest.RunOpts{Job: "hourly", Status: store.StatusSucceeded, ScheduledAt: s,
		StartedAt: s, FinishedAt: s, InstanceID: "old", Epoch: storetest.Ptr(int64(0))})

	n := startNode(t, url, "a", nodeOptions{runtime: runtimeFor(t, "127.0.0.1/32"),
		notifications: notifications(time.Second, time.Second, "127.0.0.1/32")})
	awaitSignal(t, &n.en.testSignals.leading, "leading")
	m := h.await(t, "job.missed", waitTimeout)
	missed := count(t, db, `SELECT count(*) FROM job_runs WHERE job = 'hourly' AND status = 'missed'`)
	require.Equal(t, 5, missed, "the five slots since are missed (catch-up off)")
	assert.Equal(t, 5, m.msg.Count)
	assert.Equal(t, 5, count(t, db, `SELECT count(*) FROM scheduler_notifications n JOIN job_runs r ON r.id = n.run_id AND r.status = 'missed' WHERE n.event = 'missed'`))
}
