package replica_test

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	gooidc "github.com/coreos/go-oidc/v3/oidc"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schedulerhq/scheduler/internal/config"
	"github.com/schedulerhq/scheduler/internal/idp"
	"github.com/schedulerhq/scheduler/internal/jobs"
	"github.com/schedulerhq/scheduler/internal/schedule"
	"github.com/schedulerhq/scheduler/internal/secrets/seal"
	"github.com/schedulerhq/scheduler/internal/store"
	"github.com/schedulerhq/scheduler/internal/testdb"
	"github.com/schedulerhq/scheduler/replica"
)

// balancer is the URL receivers reach the replicas at (SCHEDULER_PUBLIC_URL): it forwards
// each request to the first replica still up, as a load balancer whose health check dropped
// the dead ones.
type balancer struct {
	mu       sync.Mutex
	backends []*url.URL
	jwks     atomic.Int32 // key set fetches through it
}

func (b *balancer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == idp.JWKSPath {
		b.jwks.Add(1)
	}
	b.mu.Lock()
	target := b.backends[0]
	b.mu.Unlock()
	httputil.NewSingleHostReverseProxy(target).ServeHTTP(w, r)
}

func (b *balancer) drop(u string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for i, t := range b.backends {
		if t.String() == u {
			b.backends = append(b.backends[:i], b.backends[i+1:]...)
			return
		}
	}
}

type oidcReplica struct {
	url    string
	cancel context.CancelFunc
	done   chan struct{}
	srv    *httptest.Server
}

// startOIDCReplica starts one replica of the cluster whose public URL is public.
func startOIDCReplica(t *testing.T, db *store.DB, id, public string, box *seal.Box) (*oidcReplica, <-chan struct{}) {
	t.Helper()
	var conf []config.Job
	for _, d := range jobs.Defaults() {
		s, err := schedule.Parse(d.Schedule)
		require.NoError(t, err)
		conf = append(conf, config.Job{Name: d.Name, Schedule: s, Enabled: true, Timeout: d.Timeout, MinGap: d.MinGap})
	}
	rep, err := replica.New(replica.Config{DB: db, InstanceID: id, Log: slog.New(slog.DiscardHandler), Jobs: conf,
		APIToken: e2eToken, LeaseTimeout: 2 * time.Second, InstanceHeartbeat: 500 * time.Millisecond,
		PollInterval: 200 * time.Millisecond, Version: "test", HTTPAddr: "127.0.0.1",
		Runtime:       config.Runtime{HTTPAllow: []string{"127.0.0.1/32"}, SecretBox: box, OIDCKeyRotation: config.OIDCKeyRotationDefault},
		Notifications: config.Notifications{PublicURL: public},
		// Minutes in production; a test cannot wait a JWKS cache lifetime.
		TokenKeys: idp.Config{PrePublication: 2 * time.Second, RefreshEvery: 200 * time.Millisecond}})
	require.NoError(t, err)
	watch := rep.Listen()
	ctx, cancel := context.WithCancel(context.Background())
	r := &oidcReplica{cancel: cancel, done: make(chan struct{}), srv: httptest.NewServer(rep.Handler())}
	r.url = r.srv.URL
	go func() { defer close(r.done); rep.Run(ctx) }()
	t.Cleanup(func() { r.kill() })
	leads := make(chan struct{})
	go func() {
		select {
		case <-watch.C():
			close(leads)
		case <-r.done:
		}
	}()
	return r, leads
}

func (r *oidcReplica) kill() {
	r.cancel()
	<-r.done
	r.srv.Close()
}

// verified is what the receiver made of one call.
type verified struct {
	sub, kid, err string
	claims        idp.Claims
	at            time.Time
}

// An HTTP job whose auth asks for an OIDC token calls a receiver that verifies every
// attempt's token with go-oidc through the replicas' discovery document: through a
// rotation of the signing key (the receiver's cached key set already holds the new key),
// and through the loss of the leader. A job asking for another audience is refused by the
// same receiver, and no definition can make a token name another namespace.
func TestOIDCTokensVerifyThroughRotationAndFailover(t *testing.T) {
	raw := make([]byte, seal.KeySize)
	_, err := rand.Read(raw)
	require.NoError(t, err)
	key, err := seal.ParseKey(base64.StdEncoding.EncodeToString(raw))
	require.NoError(t, err)
	box := seal.New(key)
	db, _ := testdb.Open(t, store.Options{InstanceID: "oidc-a", LeaseTimeout: 2 * time.Second})

	lb := &balancer{}
	public := httptest.NewServer(lb)
	t.Cleanup(public.Close)
	a, aLeads := startOIDCReplica(t, db.DB, "oidc-a", public.URL, box)
	lb.backends = append(lb.backends, mustURL(t, a.url))
	select {
	case <-aLeads:
	case <-time.After(30 * time.Second):
		t.Fatal("replica a was not elected")
	}
	b, bLeads := startOIDCReplica(t, db.DB, "oidc-b", public.URL, box)
	lb.backends = append(lb.backends, mustURL(t, b.url))

	// The receiver: go-oidc's provider, from the discovery document at the public URL.
	ctx := context.Background()
	provider, err := gooidc.NewProvider(ctx, public.URL)
	require.NoError(t, err)
	billing := provider.Verifier(&gooidc.Config{ClientID: "billing"})
	var mu sync.Mutex
	var calls []verified
	var failNext atomic.Bool
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		v := verified{at: time.Now()}
		bearer, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		v.kid = kidOfToken(bearer)
		id, err := billing.Verify(r.Context(), bearer)
		if err == nil {
			v.sub = id.Subject
			err = id.Claims(&v.claims)
		}
		if err != nil {
			v.err = err.Error()
		}
		mu.Lock()
		calls = append(calls, v)
		mu.Unlock()
		switch {
		case err != nil:
			http.Error(w, "refused: "+err.Error(), http.StatusUnauthorized)
		case failNext.CompareAndSwap(true, false):
			// An echoing target: the token must not end up in the run's recorded attempts.
			http.Error(w, "try again; you sent "+bearer, http.StatusServiceUnavailable)
		}
	}))
	t.Cleanup(receiver.Close)
	taken := func() []verified {
		mu.Lock()
		defer mu.Unlock()
		out := calls
		calls = nil
		return out
	}

	do := func(method, path, body string, want int) []byte {
		t.Helper()
		status, out := e2eCall(t, public.URL, method, path, body)
		require.Equal(t, want, status, "%s %s: %s", method, path, out)
		return out
	}
	do("PUT", "/v1/namespaces/teama", `{"http_allow": ["127.0.0.1"]}`, http.StatusCreated)
	do("PUT", "/v1/namespaces/teamb", `{"http_allow": ["127.0.0.1"]}`, http.StatusCreated)
	job := func(name, audience string) string {
		backoff := "200ms"
		if name == "nightly" {
			backoff = "5s" // time to kill the leader between two attempts
		}
		return `{"name": "` + name + `", "schedule": "0 0 1 1 *", "retry": {"max_attempts": 3, "initial_backoff": "` + backoff + `"},
			"http": {"url": "` + receiver.URL + `/run", "auth": {"oidc": {"audience": "` + audience + `"}}}}`
	}
	// A definition cannot name another namespace than its route's, nor hide one in its name,
	// nor set its own Authorization beside the token.
	do("POST", "/v1/namespaces/teama/jobs", strings.Replace(job("report", "billing"), `{"name"`, `{"namespace": "teamb", "name"`, 1), http.StatusUnprocessableEntity)
	do("POST", "/v1/namespaces/teama/jobs", job("teamb/report", "billing"), http.StatusUnprocessableEntity)
	do("POST", "/v1/namespaces/teama/jobs", strings.Replace(job("report", "billing"), `"auth"`, `"headers": {"Authorization": "Bearer forged"}, "auth"`, 1), http.StatusUnprocessableEntity)
	do("POST", "/v1/namespaces/teama/jobs", job("report", "billing"), http.StatusCreated)
	do("POST", "/v1/namespaces/teama/jobs", job("payroll", "payroll"), http.StatusCreated)
	do("POST", "/v1/namespaces/teama/jobs", job("nightly", "billing"), http.StatusCreated)

	run := func(name string) (string, []verified) {
		t.Helper()
		out := do("POST", "/v1/namespaces/teama/jobs/"+name+"/runs?wait=60s", "", http.StatusOK)
		var r struct {
			ID     int64  `json:"id"`
			Status string `json:"status"`
		}
		require.NoError(t, json.Unmarshal(out[:strings.LastIndex(string(out), "}")+1], &r))
		got := taken()
		recorded := string(do("GET", fmt.Sprintf("/v1/runs/%d", r.ID), "", http.StatusOK))
		assert.NotContains(t, recorded, "eyJ", "a token echoed by the target is in the run's attempts")
		return r.Status, got
	}
	checkAll := func(got []verified, wantAttempts int) string {
		t.Helper()
		require.Len(t, got, wantAttempts)
		for i, v := range got {
			require.Empty(t, v.err, "attempt %d", i+1)
			assert.Equal(t, "teama/report", v.sub)
			assert.Equal(t, "teama", v.claims.Namespace)
			assert.Equal(t, "report", v.claims.Job)
			assert.NotZero(t, v.claims.RunID)
			assert.Equal(t, i+1, v.claims.Attempt)
			assert.Equal(t, got[0].kid, v.kid)
		}
		return got[0].kid
	}

	// Every attempt carries its own token, verified: the first attempt is refused with a 503
	// by the receiver, the second succeeds.
	failNext.Store(true)
	status, got := run("report")
	require.Equal(t, "succeeded", status)
	firstKid := checkAll(got, 2)
	fetchesBefore := lb.jwks.Load()

	// A token for another audience is refused by the same receiver.
	status, got = run("payroll")
	require.Equal(t, "failed", status)
	require.NotEmpty(t, got)
	for _, v := range got {
		assert.Contains(t, v.err, "audience")
	}

	// The rotation: refused while the next key is younger than its pre-publication, then
	// done and audited. The receiver's cached key set holds the new key already.
	var rotated []byte
	require.Eventually(t, func() bool {
		status, out := e2eCall(t, public.URL, "POST", "/v1/oidc/keys/rotate", `{"reason": "e2e"}`)
		if status == http.StatusConflict {
			require.Contains(t, string(out), "rotation-too-soon")
			return false
		}
		require.Equal(t, http.StatusOK, status, "%s", out)
		rotated = out
		return true
	}, 15*time.Second, 300*time.Millisecond)
	assert.Contains(t, string(rotated), `"previous":"`+firstKid+`"`)
	var audited int
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT count(*) FROM operator_actions WHERE action = 'oidc-rotate' AND reason = 'e2e'`).Scan(&audited))
	assert.Equal(t, 1, audited)

	failNext.Store(true)
	status, got = run("report")
	require.Equal(t, "succeeded", status)
	secondKid := checkAll(got, 2)
	assert.NotEqual(t, firstKid, secondKid, "the new key signs")
	assert.Equal(t, fetchesBefore, lb.jwks.Load(), "the receiver needed no new fetch: the key was pre-published")

	// The leader dies between attempts: its first attempt is refused, then it is killed
	// during the backoff; the follower takes over, and its attempts' tokens verify too.
	failNext.Store(true)
	code, out := e2eCall(t, public.URL, "POST", "/v1/namespaces/teama/jobs/nightly/runs", "")
	require.Equal(t, http.StatusAccepted, code, "%s", out)
	require.Eventually(t, func() bool { mu.Lock(); defer mu.Unlock(); return len(calls) >= 1 }, 30*time.Second, 20*time.Millisecond)
	lb.drop(a.url)
	a.kill()
	killed := time.Now()
	select {
	case <-bLeads:
	case <-time.After(30 * time.Second):
		t.Fatal("replica b did not take over")
	}
	require.Eventually(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		for _, v := range calls {
			if v.at.After(killed) {
				return true
			}
		}
		return false
	}, 60*time.Second, 50*time.Millisecond, "a call after the failover")
	got = taken()
	require.GreaterOrEqual(t, len(got), 2)
	for _, v := range got {
		require.Empty(t, v.err)
		assert.Equal(t, "teama/nightly", v.sub)
		assert.Equal(t, secondKid, v.kid)
	}
	assert.True(t, got[0].at.Before(killed) && got[len(got)-1].at.After(killed), "one call before the kill, one after")
	// A manual trigger through the new leader, and the discovery document from it.
	status, got = run("report")
	require.Equal(t, "succeeded", status)
	assert.Equal(t, secondKid, checkAll(got, 1))
}

func mustURL(t *testing.T, s string) *url.URL {
	u, err := url.Parse(s)
	require.NoError(t, err)
	return u
}

func kidOfToken(token string) string {
	head, _, _ := strings.Cut(token, ".")
	raw, err := base64.RawURLEncoding.DecodeString(head)
	if err != nil {
		return ""
	}
	var h struct{ Kid string }
	_ = json.Unmarshal(raw, &h)
	return fmt.Sprint(h.Kid)
}
