package engine

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	gooidc "github.com/coreos/go-oidc/v3/oidc"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schedulerhq/scheduler/internal/store"
	"github.com/schedulerhq/scheduler/internal/testdb"
)

// An HTTP job asking for an OIDC token, every second, through a SIGKILL of the leader
// among real processes behind one public URL: every call the receiver gets carries a token
// that go-oidc verifies through the discovery document at that URL, before and after the
// kill, whichever process signed it.
func TestOIDCTokensThroughALeaderKill(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real processes")
	}
	bin := buildScheduler(t, t.TempDir())
	db, dbURL := testdb.Open(t, store.Options{InstanceID: "test"})
	raw := make([]byte, 32)
	_, err := rand.Read(raw)
	require.NoError(t, err)

	// The public URL: the first process still up, as a load balancer's health check keeps.
	var mu sync.Mutex
	var backends []string
	public := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		target := backends[0]
		mu.Unlock()
		u, _ := url.Parse(target)
		httputil.NewSingleHostReverseProxy(u).ServeHTTP(w, r)
	}))
	t.Cleanup(public.Close)

	type call struct {
		at  time.Time
		err string
		sub string
	}
	var calls []call
	var verifier *gooidc.IDTokenVerifier
	inFlight := make(chan struct{}, 1)
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c := call{at: time.Now()}
		token, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		mu.Lock()
		v := verifier
		mu.Unlock()
		if v == nil {
			c.err = "the receiver is not ready"
		} else if id, err := v.Verify(r.Context(), token); err != nil {
			c.err = err.Error()
		} else {
			c.sub = id.Subject
		}
		mu.Lock()
		calls = append(calls, c)
		mu.Unlock()
		select {
		case inFlight <- struct{}{}:
		default:
		}
		time.Sleep(300 * time.Millisecond) // in flight long enough to be killed under
		if c.err != "" {
			http.Error(w, c.err, http.StatusUnauthorized)
		}
	}))
	t.Cleanup(receiver.Close)

	env := []string{"SCHEDULER_HTTP_ALLOW=127.0.0.1/32", "SCHEDULER_JOB_ROUNDS_CLOSE_ENABLED=false",
		"SCHEDULER_SECRET_KEY=" + base64.StdEncoding.EncodeToString(raw), "SCHEDULER_PUBLIC_URL=" + public.URL}
	procs := map[string]*process{}
	addrs := map[string]string{}
	for _, id := range []string{"oidc-a", "oidc-b"} {
		addrs[id] = freeAddr(t)
		procs[id] = startProcessIn(t, "", bin, dbURL, id, append(env, "SCHEDULER_HTTP_ADDR="+addrs[id])...)
		backends = append(backends, "http://"+addrs[id])
	}
	l := awaitLeader(t, db, procs, 0)
	// The leader first in the balancer's list, so that killing it makes the balancer move.
	mu.Lock()
	backends = []string{"http://" + addrs[l.InstanceID]}
	for id, a := range addrs {
		if id != l.InstanceID {
			backends = append(backends, "http://"+a)
		}
	}
	mu.Unlock()

	ctx := context.Background()
	var provider *gooidc.Provider
	require.Eventually(t, func() bool {
		provider, err = gooidc.NewProvider(ctx, public.URL)
		return err == nil
	}, waitTimeout, 100*time.Millisecond, "the discovery document is served")
	mu.Lock()
	verifier = provider.Verifier(&gooidc.Config{ClientID: "billing"})
	mu.Unlock()
	createDefinition(t, db, `{"name": "signed-every-second", "schedule": "@every 1s", "timeout": "10s",
		"retry": {"max_attempts": 3, "initial_backoff": "100ms"},
		"http": {"url": "`+receiver.URL+`/tick", "timeout": "2s", "auth": {"oidc": {"audience": "billing"}}}}`)

	countOK := func(after time.Time) int {
		mu.Lock()
		defer mu.Unlock()
		n := 0
		for _, c := range calls {
			if c.err == "" && c.at.After(after) {
				n++
			}
		}
		return n
	}
	require.Eventually(t, func() bool { return countOK(time.Time{}) >= 3 }, waitTimeout, 50*time.Millisecond)
	// Killed while a call is in flight.
	for len(inFlight) > 0 {
		<-inFlight
	}
	select {
	case <-inFlight:
	case <-time.After(waitTimeout):
		t.Fatal("no call arrived")
	}
	p := procs[l.InstanceID]
	require.NoError(t, p.cmd.Process.Signal(syscall.SIGKILL))
	_ = p.cmd.Wait()
	killed := time.Now()
	mu.Lock()
	backends = backends[1:]
	mu.Unlock()
	next := awaitLeader(t, db, procs, l.Epoch)
	require.NotEqual(t, l.InstanceID, next.InstanceID)
	require.Eventually(t, func() bool { return countOK(killed) >= 3 }, 30*time.Second, 50*time.Millisecond,
		"verified calls from the new leader")

	mu.Lock()
	defer mu.Unlock()
	for _, c := range calls {
		assert.Empty(t, c.err, "a call whose token did not verify")
		if c.err == "" {
			assert.Equal(t, "default/signed-every-second", c.sub)
		}
	}
}
