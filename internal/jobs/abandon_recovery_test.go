package jobs_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schedulerhq/scheduler/internal/jobcontract"
	"github.com/schedulerhq/scheduler/internal/jobs"
	"github.com/schedulerhq/scheduler/internal/store"
	"github.com/schedulerhq/scheduler/internal/testdb"
)

// recordingSender records every message it is asked to send.
type recordingSender struct {
	idempotent bool
	mu         sync.Mutex
	sent       []jobs.Message
}

func (*recordingSender) Provider() string   { return "test" }
func (s *recordingSender) Idempotent() bool { return s.idempotent }
func (s *recordingSender) Send(_ context.Context, m jobs.Message) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sent = append(s.sent, m)
	return "test-" + m.IdempotencyKey(), nil
}

// perLead counts the messages sent to each lead.
func (s *recordingSender) perLead(t *testing.T) map[int64]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	counts := map[int64]int{}
	for _, m := range s.sent {
		var p struct {
			LeadID int64 `json:"lead_id"`
		}
		require.NoError(t, json.Unmarshal(m.Payload, &p))
		counts[p.LeadID]++
	}
	return counts
}

// crashingSender stands for a process that dies as it starts sending: from then on nothing
// it does reaches the database (see crashAfterClaim) and nothing goes out.
type crashingSender struct {
	jobs.Sender
	crashed *atomic.Bool
}

func (s crashingSender) Send(context.Context, jobs.Message) (string, error) {
	s.crashed.Store(true)
	return "", errCrashed
}

var errCrashed = errors.New("process crashed")

const abandonDelay = 30 * time.Minute

// pipeline is a message pipeline with the default settings.
func pipeline(s jobs.Sender) *jobs.Pipeline { return jobs.NewPipeline(s, jobs.SendSettings{}) }

// seedLeads creates a tenant with a form and: `abandoned` leads started more than the delay
// before runNow and never submitted (channels EMAIL, SMS and WHATSAPP in turn), 10 submitted
// ones and 10 started within the delay. It returns the abandoned leads' ids.
func seedLeads(t *testing.T, pool *pgxpool.Pool, abandoned int) []int64 {
	t.Helper()
	ctx := context.Background()
	_, err := pool.Exec(ctx, `
INSERT INTO tenants (name) VALUES ('t');
INSERT INTO forms (tenant_id, name) SELECT id, 'trial' FROM tenants`)
	require.NoError(t, err)
	rows, err := pool.Query(ctx, `
INSERT INTO leads (form_id, tenant_id, session_id, email, phone, channel, started_at)
SELECT f.id, f.tenant_id, 'abandoned-' || i, 'lead' || i || '@example.com', '+33600' || i,
       (ARRAY['EMAIL', 'SMS', 'WHATSAPP'])[1 + i % 3], $1::timestamptz - $2::interval - i * interval '1 minute'
FROM forms f, generate_series(1, $3::int) AS i
RETURNING id`, runNow, abandonDelay, abandoned)
	require.NoError(t, err)
	var ids []int64
	for rows.Next() {
		var id int64
		require.NoError(t, rows.Scan(&id))
		ids = append(ids, id)
	}
	require.NoError(t, rows.Err())
	_, err = pool.Exec(ctx, `
INSERT INTO leads (form_id, tenant_id, session_id, email, channel, started_at, submitted_at)
SELECT f.id, f.tenant_id, 'submitted-' || i, 's' || i || '@example.com', 'EMAIL',
       $1::timestamptz - interval '2 hours', $1::timestamptz - interval '1 hour'
FROM forms f, generate_series(1, 10) AS i`, runNow)
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `
INSERT INTO leads (form_id, tenant_id, session_id, email, channel, started_at)
SELECT f.id, f.tenant_id, 'recent-' || i, 'r' || i || '@example.com', 'EMAIL', $1::timestamptz - interval '5 minutes'
FROM forms f, generate_series(1, 10) AS i`, runNow)
	require.NoError(t, err)
	return ids
}

// deliveries counts message_deliveries rows by status.
func deliveries(t *testing.T, pool *pgxpool.Pool) map[string]int {
	t.Helper()
	rows, err := pool.Query(context.Background(), `SELECT status, count(*) FROM message_deliveries GROUP BY status`)
	require.NoError(t, err)
	out := map[string]int{}
	for rows.Next() {
		var s string
		var n int
		require.NoError(t, rows.Scan(&s, &n))
		out[s] = n
	}
	require.NoError(t, rows.Err())
	return out
}

func TestAbandonRecoveryConcurrentRunsSendEachLeadOneMessage(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, _ := testdb.Open(t, store.Options{})
	ids := seedLeads(t, db.Pool, 250)
	sender := &recordingSender{}
	j := jobs.NewAbandonRecovery(jobs.AbandonSettings{Delay: abandonDelay, BatchSize: 20}, pipeline(sender))
	env := newEnv(t, db, "abandon-recovery")

	stats := runTogether(t, j, env, 2)
	var total jobcontract.Stats
	for _, st := range stats {
		total.Add(st)
	}
	t.Logf("2 runs: %+v", stats)
	perLead := sender.perLead(t)
	assert.Len(t, perLead, len(ids), "every abandoned lead got a message, and no other lead did")
	for _, id := range ids {
		assert.Equal(t, 1, perLead[id], "lead %d", id)
	}
	assert.EqualValues(t, len(ids), total.Changed)
	assert.EqualValues(t, len(ids), total.Detail["sent"])
	assert.Equal(t, map[string]int{"SENT": len(ids)}, deliveries(t, db.Pool))

	var stamped, wrong int
	require.NoError(t, db.Pool.QueryRow(ctx, `
SELECT count(*) FILTER (WHERE l.abandoned_at = $2 AND l.recovery_sent_at IS NOT NULL),
       count(*) FILTER (WHERE d.id IS NULL OR d.provider_message_id <> 'test-message-delivery-' || (SELECT deployment_id FROM scheduler_identity) || '-' || d.id
                        OR d."to" <> CASE l.channel WHEN 'EMAIL' THEN l.email ELSE l.phone END
                        OR d.channel <> l.channel OR d.sent_at IS NULL
                        OR d.payload_hash <> encode(sha256(convert_to(d.payload::text, 'UTF8')), 'hex'))
FROM leads l LEFT JOIN message_deliveries d ON d.lead_id = l.id
WHERE l.id = ANY($1)`, ids, runNow).Scan(&stamped, &wrong))
	assert.Equal(t, len(ids), stamped, "abandoned leads are marked abandoned and sent")
	assert.Zero(t, wrong, "each delivery row names its lead's channel, address and provider id")
	var others int
	require.NoError(t, db.Pool.QueryRow(ctx, `
SELECT count(*) FROM leads WHERE NOT id = ANY($1) AND (abandoned_at IS NOT NULL OR recovery_sent_at IS NOT NULL)`,
		ids).Scan(&others))
	assert.Zero(t, others, "submitted and recent leads are left alone")

	again, err := j.Run(ctx, env)
	require.NoError(t, err)
	assert.Zero(t, again.Processed)
	assert.Len(t, sender.sent, len(ids), "a later run sends nothing more")
}

// crashAfterClaim runs the job with a sender that crashes the process at its first send,
// leaving that batch's claims PENDING, then ages the claims past the claim timeout.
func crashAfterClaim(t *testing.T, db *testdb.DB, env *jobcontract.Env, s jobs.AbandonSettings, sender jobs.Sender) {
	t.Helper()
	var crashed atomic.Bool
	dying := *env
	dying.Tx = func(ctx context.Context, fn func(pgx.Tx) error) error {
		if crashed.Load() {
			return errCrashed
		}
		return env.Tx(ctx, fn)
	}
	_, err := jobs.NewAbandonRecovery(s, pipeline(crashingSender{Sender: sender, crashed: &crashed})).Run(context.Background(), &dying)
	require.ErrorIs(t, err, errCrashed)
	require.Equal(t, map[string]int{"PENDING": s.BatchSize}, deliveries(t, db.Pool),
		"the crash left the batch's claims behind")

	// Within the claim timeout a PENDING claim may still be sending elsewhere: left alone.
	st, err := jobs.NewAbandonRecovery(s, pipeline(sender)).Run(context.Background(), env)
	require.NoError(t, err)
	require.Zero(t, st.Detail["orphan_resent"]+st.Detail["orphan_failed"])
	require.Equal(t, s.BatchSize, deliveries(t, db.Pool)["PENDING"])
	_, err = db.Pool.Exec(context.Background(),
		`UPDATE message_deliveries SET claimed_at = claimed_at - $1::interval WHERE status = 'PENDING'`, s.ClaimTimeout)
	require.NoError(t, err)
}

func TestAbandonRecoveryAfterCrashResendsOnlyThroughAnIdempotentWebhook(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, _ := testdb.Open(t, store.Options{})
	ids := seedLeads(t, db.Pool, 9)
	var mu sync.Mutex
	keys := map[string]int{} // Idempotency-Key -> POSTs received
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var m jobs.Message
		body, _ := io.ReadAll(r.Body)
		if json.Unmarshal(body, &m) != nil || r.Header.Get("Idempotency-Key") != m.IdempotencyKey() {
			http.Error(w, "bad message", http.StatusBadRequest)
			return
		}
		mu.Lock()
		keys[m.IdempotencyKey()]++
		mu.Unlock()
		_, _ = w.Write([]byte(`{"id":"wh-` + m.IdempotencyKey() + `"}`))
	}))
	defer srv.Close()
	webhook := jobs.NewWebhookSender(jobs.WebhookSettings{URL: srv.URL, MaxAttempts: 2, Backoff: time.Millisecond})
	s := jobs.AbandonSettings{Delay: abandonDelay, BatchSize: 4, ClaimTimeout: time.Minute}
	env := newEnv(t, db, "abandon-recovery")

	crashAfterClaim(t, db, env, s, webhook)
	require.Len(t, keys, len(ids)-s.BatchSize, "the run after the crash sent the other leads' messages")
	st, err := jobs.NewAbandonRecovery(s, pipeline(webhook)).Run(ctx, env)
	require.NoError(t, err)
	assert.EqualValues(t, s.BatchSize, st.Detail["orphan_resent"])

	assert.Len(t, keys, len(ids), "every lead's message reached the webhook")
	for key, n := range keys {
		assert.Equal(t, 1, n, key)
	}
	assert.Equal(t, map[string]int{"SENT": len(ids)}, deliveries(t, db.Pool))
	var resent int
	require.NoError(t, db.Pool.QueryRow(ctx, `
SELECT count(*) FROM message_deliveries
WHERE attempts = 2 AND provider_message_id = 'wh-message-delivery-' || (SELECT deployment_id FROM scheduler_identity) || '-' || id`).Scan(&resent))
	assert.Equal(t, s.BatchSize, resent, "the orphans were re-claimed (attempt 2) and sent under their own key")
}

func TestAbandonRecoveryAfterCrashMarksUnknownOutcomeFailed(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, _ := testdb.Open(t, store.Options{})
	ids := seedLeads(t, db.Pool, 7)
	sender := &recordingSender{idempotent: false}
	s := jobs.AbandonSettings{Delay: abandonDelay, BatchSize: 3, ClaimTimeout: time.Minute}
	env := newEnv(t, db, "abandon-recovery")

	crashAfterClaim(t, db, env, s, sender)
	st, err := jobs.NewAbandonRecovery(s, pipeline(sender)).Run(ctx, env)
	require.NoError(t, err)
	assert.EqualValues(t, s.BatchSize, st.Detail["orphan_failed"])
	assert.Len(t, sender.sent, len(ids)-s.BatchSize, "the orphaned messages were not resent")
	for lead, n := range sender.perLead(t) {
		assert.Equal(t, 1, n, "lead %d", lead)
	}
	assert.Equal(t, map[string]int{"SENT": len(ids) - s.BatchSize, "FAILED": s.BatchSize}, deliveries(t, db.Pool))
	var reasons int
	require.NoError(t, db.Pool.QueryRow(ctx, `
SELECT count(*) FROM message_deliveries WHERE status = 'FAILED' AND error LIKE 'outcome unknown after crash%'`).Scan(&reasons))
	assert.Equal(t, s.BatchSize, reasons)
}

func TestAbandonRecoveryWebhookRetriesThenRecordsOutcome(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	var calls atomic.Int64
	flaky := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) == 1 {
			http.Error(w, "try again", http.StatusInternalServerError)
			return
		}
		_, _ = w.Write([]byte(`{"id":"provider-42"}`))
	}))
	defer flaky.Close()
	down := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "provider down", http.StatusBadGateway)
	}))
	defer down.Close()

	for _, tc := range []struct {
		name, url, status, providerID, errLike string
		calls                                  int64
	}{
		{name: "500 then 200", url: flaky.URL, status: "SENT", providerID: "provider-42", calls: 2},
		{name: "always 502", url: down.URL, status: "FAILED", errLike: "%attempt 3 of 3%502 Bad Gateway: provider down%"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			db, _ := testdb.Open(t, store.Options{})
			seedLeads(t, db.Pool, 1)
			webhook := jobs.NewWebhookSender(jobs.WebhookSettings{URL: tc.url, MaxAttempts: 3, Backoff: time.Millisecond})
			st, err := jobs.NewAbandonRecovery(jobs.AbandonSettings{Delay: abandonDelay}, pipeline(webhook)).
				Run(ctx, newEnv(t, db, "abandon-recovery"))
			require.NoError(t, err)
			var status string
			var providerID, errText *string
			require.NoError(t, db.Pool.QueryRow(ctx,
				`SELECT status, provider_message_id, error FROM message_deliveries`).Scan(&status, &providerID, &errText))
			assert.Equal(t, tc.status, status)
			if tc.status == "SENT" {
				assert.Equal(t, tc.calls, calls.Load())
				require.NotNil(t, providerID)
				assert.Equal(t, tc.providerID, *providerID)
				assert.Nil(t, errText)
				assert.EqualValues(t, 1, st.Changed)
				return
			}
			assert.EqualValues(t, 1, st.Errors)
			require.NotNil(t, errText)
			var matches bool
			require.NoError(t, db.Pool.QueryRow(ctx, `SELECT $1::text LIKE $2`, *errText, tc.errLike).Scan(&matches))
			assert.True(t, matches, "error stored: %s", *errText)
		})
	}
}

func TestAbandonRecoveryDryRunSendsNothing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, _ := testdb.Open(t, store.Options{})
	ids := seedLeads(t, db.Pool, 45)
	sender := &recordingSender{}
	env := newEnv(t, db, "abandon-recovery")
	env.Params.DryRun = true
	st, err := jobs.NewAbandonRecovery(jobs.AbandonSettings{Delay: abandonDelay, BatchSize: 10}, pipeline(sender)).Run(ctx, env)
	require.NoError(t, err)
	assert.EqualValues(t, len(ids), st.Changed, "a dry run counts the messages it would send")
	assert.Empty(t, sender.sent)
	assert.Empty(t, deliveries(t, db.Pool))
	var marked int
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT count(*) FROM leads WHERE abandoned_at IS NOT NULL`).Scan(&marked))
	assert.Zero(t, marked)
}

func TestAbandonRecoveryCancelledRunGivesBackUnsentClaims(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	db, _ := testdb.Open(t, store.Options{})
	ids := seedLeads(t, db.Pool, 5)
	// The run is cancelled (timeout, cancel request) while it sends the first message, which
	// still goes out.
	sender := &cancellingSender{cancel: cancel}
	s := jobs.AbandonSettings{Delay: abandonDelay, BatchSize: 5}
	env := newEnv(t, db, "abandon-recovery")
	// One send at a time: the cancel comes while the first message is the only one handed out.
	st, err := jobs.NewAbandonRecovery(s, jobs.NewPipeline(sender, jobs.SendSettings{Concurrency: 1})).Run(ctx, env)
	require.ErrorIs(t, err, context.Canceled)
	assert.EqualValues(t, 1, st.Detail["sent"])
	assert.EqualValues(t, 4, st.Detail["released"])
	assert.Equal(t, map[string]int{"SENT": 1}, deliveries(t, db.Pool),
		"the message that left is recorded although the run was cancelled; the others are given back")

	next := &recordingSender{}
	st, err = jobs.NewAbandonRecovery(s, pipeline(next)).Run(context.Background(), env)
	require.NoError(t, err)
	assert.EqualValues(t, 4, st.Changed, "the next run sends the given-back messages at once")
	assert.Len(t, next.perLead(t), 4)
	assert.NotContains(t, next.perLead(t), sender.leadID(t), "the lead already sent is not sent again")
	assert.Equal(t, map[string]int{"SENT": len(ids)}, deliveries(t, db.Pool))
}

// cancellingSender sends its first message and cancels the run while doing so.
type cancellingSender struct {
	recordingSender
	cancel context.CancelFunc
}

func (s *cancellingSender) Send(ctx context.Context, m jobs.Message) (string, error) {
	s.cancel()
	return s.recordingSender.Send(ctx, m)
}

// leadID is the lead of the one message sent.
func (s *cancellingSender) leadID(t *testing.T) int64 {
	for id := range s.perLead(t) {
		return id
	}
	t.Fatal("nothing sent")
	return 0
}
