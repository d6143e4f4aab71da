package idp_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	gooidc "github.com/coreos/go-oidc/v3/oidc"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schedulerhq/scheduler/internal/idp"
	"github.com/schedulerhq/scheduler/internal/secrets/seal"
	"github.com/schedulerhq/scheduler/internal/store"
	"github.com/schedulerhq/scheduler/internal/testdb"
)

func TestMain(m *testing.M) { testdb.Main(m) }

func newBox(t *testing.T) *seal.Box { return seal.New(newSecretKey(t)) }

func newSecretKey(t *testing.T) *seal.Key {
	raw := make([]byte, seal.KeySize)
	_, err := rand.Read(raw)
	require.NoError(t, err)
	k, err := seal.ParseKey(base64.StdEncoding.EncodeToString(raw))
	require.NoError(t, err)
	return k
}

// clock is a test's time, moved by hand.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// issuer serves k's discovery document and key set at its own URL, as a replica does.
func issuer(t *testing.T, db *testdb.DB, box *seal.Box, c *clock) (*idp.Keys, *httptest.Server) {
	mux := http.NewServeMux()
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	conf := idp.Config{DB: db.DB, Box: box, Issuer: srv.URL, RefreshEvery: -1}
	if c != nil {
		conf.Now = c.Now
	}
	k := idp.New(conf)
	mux.Handle(idp.DiscoveryPath, k)
	mux.Handle(idp.JWKSPath, k)
	return k, srv
}

func verifier(t *testing.T, ctx context.Context, srv *httptest.Server, audience string, now func() time.Time) *gooidc.IDTokenVerifier {
	p, err := gooidc.NewProvider(ctx, srv.URL)
	require.NoError(t, err)
	return p.Verifier(&gooidc.Config{ClientID: audience, Now: now})
}

func TestTokenVerifiesForItsAudienceOnly(t *testing.T) {
	t.Parallel()
	db, _ := testdb.Open(t, store.Options{})
	ctx := context.Background()
	k, srv := issuer(t, db, newBox(t), nil)

	slot := time.Date(2026, 11, 29, 6, 0, 0, 0, time.UTC)
	tok, err := k.Sign(ctx, idp.Token{Job: "teama/nightly", Audience: "billing", RunID: 42, ScheduledAt: slot, Attempt: 2})
	require.NoError(t, err)

	id, err := verifier(t, ctx, srv, "billing", nil).Verify(ctx, tok)
	require.NoError(t, err)
	assert.Equal(t, srv.URL, id.Issuer)
	assert.Equal(t, "teama/nightly", id.Subject)
	var c idp.Claims
	require.NoError(t, id.Claims(&c))
	assert.Equal(t, "teama", c.Namespace)
	assert.Equal(t, "nightly", c.Job)
	assert.Equal(t, int64(42), c.RunID)
	assert.Equal(t, "2026-11-29T06:00:00Z", c.ScheduledAt)
	assert.Equal(t, 2, c.Attempt)
	assert.NotEmpty(t, c.ID)
	assert.WithinDuration(t, id.IssuedAt.Add(idp.TokenLifetime), id.Expiry, time.Second)

	// Another audience's verifier refuses it: a token for billing cannot call payroll.
	_, err = verifier(t, ctx, srv, "payroll", nil).Verify(ctx, tok)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "audience")

	// Every token has its own jti.
	again, err := k.Sign(ctx, idp.Token{Job: "teama/nightly", Audience: "billing", RunID: 42, ScheduledAt: slot, Attempt: 2})
	require.NoError(t, err)
	id2, err := verifier(t, ctx, srv, "billing", nil).Verify(ctx, again)
	require.NoError(t, err)
	var c2 idp.Claims
	require.NoError(t, id2.Claims(&c2))
	assert.NotEqual(t, c.ID, c2.ID)

	// The job of namespace default is named default/<name>: a sub always names its namespace.
	tok, err = k.Sign(ctx, idp.Token{Job: "nightly", Audience: "billing", RunID: 1})
	require.NoError(t, err)
	id, err = verifier(t, ctx, srv, "billing", nil).Verify(ctx, tok)
	require.NoError(t, err)
	assert.Equal(t, "default/nightly", id.Subject)
}

func TestExpiredTokenRefused(t *testing.T) {
	t.Parallel()
	db, _ := testdb.Open(t, store.Options{})
	ctx := context.Background()
	c := &clock{now: time.Now()}
	k, srv := issuer(t, db, newBox(t), c)
	tok, err := k.Sign(ctx, idp.Token{Job: "teama/nightly", Audience: "billing", RunID: 1})
	require.NoError(t, err)
	later := func() time.Time { return time.Now().Add(idp.TokenLifetime + time.Minute) }
	_, err = verifier(t, ctx, srv, "billing", later).Verify(ctx, tok)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "expired")
}

func TestKeysNeverPublishedNorStoredInClear(t *testing.T) {
	t.Parallel()
	db, _ := testdb.Open(t, store.Options{})
	ctx := context.Background()
	c := &clock{now: time.Now()}
	k, srv := issuer(t, db, newBox(t), c)
	_, err := k.Sign(ctx, idp.Token{Job: "teama/nightly", Audience: "billing", RunID: 1})
	require.NoError(t, err)
	c.Add(idp.RotateEveryDefault)
	require.NoError(t, k.Maintain(ctx)) // a rotation: next, current and previous keys
	privates := k.PrivateKeysForTest(ctx, t)
	require.Len(t, privates, 3)

	for _, path := range []string{idp.DiscoveryPath, idp.JWKSPath} {
		resp, err := http.Get(srv.URL + path)
		require.NoError(t, err)
		var body bytes.Buffer
		_, _ = body.ReadFrom(resp.Body)
		resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode, path)
		assert.Contains(t, resp.Header.Get("Cache-Control"), "max-age=", path)
		var doc map[string]any
		require.NoError(t, json.Unmarshal(body.Bytes(), &doc), path)
		for _, key := range asSlice(doc["keys"]) {
			jwk := key.(map[string]any)
			for _, private := range []string{"d", "p", "q", "dp", "dq", "qi", "k"} {
				assert.NotContains(t, jwk, private, "the key set publishes a private part")
			}
		}
		for _, d := range privates {
			assert.NotContains(t, body.String(), base64.RawURLEncoding.EncodeToString(d), path)
		}
	}
	resp, err := http.Get(srv.URL + idp.JWKSPath)
	require.NoError(t, err)
	var set struct{ Keys []map[string]any }
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&set))
	resp.Body.Close()
	assert.Len(t, set.Keys, 3, "next, current and previous are published")

	// The table holds no private scalar, in any encoding a dump shows.
	var dump string
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT string_agg(t::text || encode(coalesce(sealed, ''), 'hex') || encode(coalesce(sealed, ''), 'base64'), ' ') FROM scheduler_oidc_keys t`).Scan(&dump))
	for _, d := range privates {
		for _, enc := range []string{base64.RawURLEncoding.EncodeToString(d), base64.StdEncoding.EncodeToString(d), strings.ToLower(hexOf(d))} {
			assert.NotContains(t, dump, enc)
		}
	}
	assert.NotContains(t, dump, `"d"`)
}

func TestRotationPrePublishesAndKeepsThePreviousKey(t *testing.T) {
	t.Parallel()
	db, _ := testdb.Open(t, store.Options{})
	ctx := context.Background()
	c := &clock{now: time.Now()}
	k, srv := issuer(t, db, newBox(t), c)

	// The first key signs at once; a next key is published beside it from the start.
	first, err := k.Sign(ctx, idp.Token{Job: "teama/nightly", Audience: "billing", RunID: 1})
	require.NoError(t, err)
	states := k.StatesForTest(ctx, t)
	require.Equal(t, []string{store.OIDCKeyCurrent, store.OIDCKeyNext}, states)

	// A verifier caches the key set now, and never fetches it again.
	cached := cachedVerifier(t, ctx, srv, "billing", c.Now)

	// Asked too soon, the rotation is refused: the next key has not been published for a
	// whole cache lifetime of the key set.
	_, err = k.Rotate(ctx, nil)
	var soon *idp.TooSoonError
	require.ErrorAs(t, err, &soon)
	assert.Contains(t, err.Error(), "published")

	c.Add(idp.PrePublicationDefault)
	last, err := k.Sign(ctx, idp.Token{Job: "teama/nightly", Audience: "billing", RunID: 2})
	require.NoError(t, err)
	require.Equal(t, kidOf(t, first), kidOf(t, last))
	kids, err := k.Rotate(ctx, nil)
	require.NoError(t, err)
	require.NotEmpty(t, kids.Current)
	second, err := k.Sign(ctx, idp.Token{Job: "teama/nightly", Audience: "billing", RunID: 2})
	require.NoError(t, err)
	assert.NotEqual(t, kidOf(t, first), kidOf(t, second), "the new key signs")

	// The verifier that cached the key set before the rotation verifies the new key's token.
	_, err = cached.Verify(ctx, second)
	require.NoError(t, err)
	// The old key stays published: a token it signed just before verifies too.
	_, err = verifier(t, ctx, srv, "billing", c.Now).Verify(ctx, last)
	require.NoError(t, err)
	require.Equal(t, []string{store.OIDCKeyPrevious, store.OIDCKeyCurrent, store.OIDCKeyNext}, k.StatesForTest(ctx, t))

	// Once every token it signed has expired, the previous key is retired: unpublished, and
	// its sealed private half erased.
	c.Add(idp.TokenLifetime + 2*time.Minute)
	require.NoError(t, k.Maintain(ctx))
	require.Equal(t, []string{store.OIDCKeyCurrent, store.OIDCKeyNext}, k.StatesForTest(ctx, t))
	var sealed int
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT count(*) FROM scheduler_oidc_keys WHERE state = 'retired' AND sealed IS NULL`).Scan(&sealed))
	assert.Equal(t, 1, sealed)
}

func TestRotationIsDueOnItsSchedule(t *testing.T) {
	t.Parallel()
	db, _ := testdb.Open(t, store.Options{})
	ctx := context.Background()
	c := &clock{now: time.Now()}
	k, _ := issuer(t, db, newBox(t), c)
	first, err := k.Sign(ctx, idp.Token{Job: "a", Audience: "x"})
	require.NoError(t, err)
	c.Add(idp.RotateEveryDefault - time.Minute)
	require.NoError(t, k.Maintain(ctx))
	same, err := k.Sign(ctx, idp.Token{Job: "a", Audience: "x"})
	require.NoError(t, err)
	assert.Equal(t, kidOf(t, first), kidOf(t, same))
	c.Add(2 * time.Minute)
	require.NoError(t, k.Maintain(ctx))
	rotated, err := k.Sign(ctx, idp.Token{Job: "a", Audience: "x"})
	require.NoError(t, err)
	assert.NotEqual(t, kidOf(t, first), kidOf(t, rotated))
}

// Replicas that all find no key at once, or a rotation due at once, make one key each time.
func TestConcurrentReplicasMakeOneKey(t *testing.T) {
	t.Parallel()
	db, _ := testdb.Open(t, store.Options{})
	ctx := context.Background()
	box := newBox(t)
	c := &clock{now: time.Now()}
	var replicas []*idp.Keys
	for range 6 {
		replicas = append(replicas, idp.New(idp.Config{DB: db.DB, Box: box, Issuer: "https://scheduler.example.com", Now: c.Now, RefreshEvery: -1}))
	}
	sign := func() []string {
		var wg sync.WaitGroup
		kids := make([]string, len(replicas))
		for i, k := range replicas {
			wg.Add(1)
			go func() {
				defer wg.Done()
				tok, err := k.Sign(ctx, idp.Token{Job: "a", Audience: "x"})
				assert.NoError(t, err)
				kids[i] = kidOf(t, tok)
			}()
		}
		wg.Wait()
		return kids
	}
	kids := sign()
	for _, kid := range kids {
		assert.Equal(t, kids[0], kid, "every replica signs with the one current key")
	}
	c.Add(idp.RotateEveryDefault)
	rotated := sign()
	for _, kid := range rotated {
		assert.Equal(t, rotated[0], kid)
	}
	assert.NotEqual(t, kids[0], rotated[0])
	var n int
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT count(*) FROM scheduler_oidc_keys`).Scan(&n))
	assert.Equal(t, 3, n, "first, its next, and the next after the rotation")
}

func TestNoSecretKeyNoToken(t *testing.T) {
	t.Parallel()
	db, _ := testdb.Open(t, store.Options{})
	k := idp.New(idp.Config{DB: db.DB, Box: seal.New(nil), Issuer: "https://scheduler.example.com"})
	_, err := k.Sign(context.Background(), idp.Token{Job: "a", Audience: "x"})
	require.ErrorIs(t, err, idp.ErrNoSecretKey)
	assert.Contains(t, err.Error(), "SCHEDULER_SECRET_KEY")
	assert.ErrorIs(t, k.CanSign(), idp.ErrNoSecretKey)
}

// cachedVerifier fetches the key set once, then never again: a verifier with a long cache.
func cachedVerifier(t *testing.T, ctx context.Context, srv *httptest.Server, audience string, now func() time.Time) *gooidc.IDTokenVerifier {
	resp, err := http.Get(srv.URL + idp.JWKSPath)
	require.NoError(t, err)
	defer resp.Body.Close()
	var set struct {
		Keys []json.RawMessage `json:"keys"`
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&set))
	keys := idp.PublicKeysForTest(t, set.Keys)
	return gooidc.NewVerifier(srv.URL, &gooidc.StaticKeySet{PublicKeys: keys}, &gooidc.Config{ClientID: audience, SupportedSigningAlgs: []string{idp.Alg}, Now: now})
}

func kidOf(t *testing.T, token string) string {
	head, _, _ := strings.Cut(token, ".")
	raw, err := base64.RawURLEncoding.DecodeString(head)
	require.NoError(t, err)
	var h struct{ Kid string }
	require.NoError(t, json.Unmarshal(raw, &h))
	return h.Kid
}

func asSlice(v any) []any { s, _ := v.([]any); return s }

func hexOf(b []byte) string {
	const digits = "0123456789abcdef"
	out := make([]byte, 0, 2*len(b))
	for _, c := range b {
		out = append(out, digits[c>>4], digits[c&15])
	}
	return string(out)
}

// A rotation of SCHEDULER_SECRET_KEY re-seals the signing keys too, and they go on signing
// with the new key alone.
func TestResealWithANewSecretKey(t *testing.T) {
	t.Parallel()
	db, _ := testdb.Open(t, store.Options{})
	ctx := context.Background()
	oldKey := newSecretKey(t)
	k := idp.New(idp.Config{DB: db.DB, Box: seal.New(oldKey), Issuer: "https://s.example", RefreshEvery: -1})
	_, err := k.Sign(ctx, idp.Token{Job: "a", Audience: "x"})
	require.NoError(t, err)

	newKey := newSecretKey(t)
	newBoxOnly := seal.New(newKey)
	rotating := seal.New(newKey, oldKey)
	report, err := idp.Reseal(ctx, db.DB, rotating)
	require.NoError(t, err)
	assert.Equal(t, 2, report.Resealed, "current and next")
	again, err := idp.Reseal(ctx, db.DB, rotating)
	require.NoError(t, err)
	assert.Zero(t, again.Resealed)

	after := idp.New(idp.Config{DB: db.DB, Box: newBoxOnly, Issuer: "https://s.example", RefreshEvery: -1})
	_, err = after.Sign(ctx, idp.Token{Job: "a", Audience: "x"})
	require.NoError(t, err, "the old SCHEDULER_SECRET_KEY is no longer needed")
}

// A replica whose SCHEDULER_SECRET_KEY did not seal the keys cannot sign, and says which key
// it lacks; it still serves the key set, which holds no private half.
func TestAnotherSecretKeyCannotSignButPublishes(t *testing.T) {
	t.Parallel()
	db, _ := testdb.Open(t, store.Options{})
	ctx := context.Background()
	k := idp.New(idp.Config{DB: db.DB, Box: newBox(t), Issuer: "https://s.example", RefreshEvery: -1})
	_, err := k.Sign(ctx, idp.Token{Job: "a", Audience: "x"})
	require.NoError(t, err)

	other := idp.New(idp.Config{DB: db.DB, Box: newBox(t), Issuer: "https://s.example", RefreshEvery: -1})
	_, err = other.Sign(ctx, idp.Token{Job: "a", Audience: "x"})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "SCHEDULER_SECRET_KEY_PREVIOUS")
	set, err := other.JWKS(ctx)
	require.NoError(t, err)
	assert.Len(t, set.Keys, 2)
}
