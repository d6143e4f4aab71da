package outbound_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schedulerhq/scheduler/internal/outbound"
	"github.com/schedulerhq/scheduler/internal/store"
	"github.com/schedulerhq/scheduler/internal/targets"
	"github.com/schedulerhq/scheduler/internal/testdb"
)

func TestMain(m *testing.M) { testdb.Main(m) }

func declare(t *testing.T, urls map[string]string) *targets.SQLTargets {
	t.Helper()
	var list []*targets.SQLTarget
	for name, u := range urls {
		conn, err := pgx.ParseConfig(u)
		require.NoError(t, err)
		list = append(list, targets.NewSQLTarget(targets.SQLTargetConfig{Name: name, Conn: conn}))
	}
	return targets.NewSQLTargets(list...)
}

// The surface is what the namespace row and the bound logins say at the moment it is read:
// default, never set, has every target no other namespace bound; a namespace has only its
// own, and only while its login is bound to it (a target whose URL the operator changed to
// another login is refused until an admin binds it again).
func TestSurfaceFollowsTheBindings(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, _ := testdb.Open(t, store.Options{})
	sqlTargets := declare(t, map[string]string{
		"APP": "postgres://app_jobs:pw@db:5432/app", "OTHER": "postgres://other_jobs:pw2@db:5432/app"})
	guard, err := targets.NewGuard([]string{"10.0.0.0/8"})
	require.NoError(t, err)
	p := outbound.New(guard, sqlTargets, map[string]string{"TOKEN": "t", "APP_PW": "pw", "EMPTY": ""}, db.DB)
	assert.Equal(t, map[string]string{"TOKEN": "t"}, p.OperatorSecrets(), "no target's password, nothing empty")

	b, problems := p.CheckBinding("teama", &[]string{"app", "APP"}, &[]string{"10.1.0.0/16", "10.2.3.4"}, &[]string{"TOKEN"})
	require.Empty(t, problems)
	assert.Equal(t, []string{"APP"}, *b.SQLTargets)
	assert.Equal(t, []string{"10.1.0.0/16", "10.2.3.4"}, *b.HTTPAllow)
	assert.Equal(t, []string{"app_jobs@db:5432/app", "app_jobs@db:5432/app"}, b.Logins)
	_, _, err = db.PutNamespace(ctx, store.Namespace{Name: "teama", SQLTargets: b.SQLTargets, HTTPAllow: b.HTTPAllow, EnvSecrets: b.EnvSecrets})
	require.NoError(t, err)

	// Written but not yet bound (the API does both in one transaction): not usable.
	s, err := p.For(ctx, "teama")
	require.NoError(t, err)
	assert.Empty(t, s.SQLTargetNames(), "a target whose login is not bound to the namespace")
	held, err := db.BindSQLLogins(ctx, "teama", b.Logins)
	require.NoError(t, err)
	assert.Empty(t, held)

	s, err = p.For(ctx, "teama")
	require.NoError(t, err)
	assert.Equal(t, []string{"APP"}, s.SQLTargetNames())
	_, err = s.SQLTarget("other")
	assert.EqualError(t, err, `"other" is not a SQL target of namespace teama; its targets: APP (an admin binds one with PUT /v1/namespaces/teama {"sql_targets": ["NAME"]})`)
	def, err := p.For(ctx, "default")
	require.NoError(t, err)
	assert.Equal(t, []string{"OTHER"}, def.SQLTargetNames(), "default keeps what no other namespace bound")

	held, err = db.BindSQLLogins(ctx, "default", []string{"app_jobs@db:5432/app"})
	require.NoError(t, err)
	assert.Equal(t, map[string]string{"app_jobs@db:5432/app": "teama"}, held)

	g, err := p.GuardFor(ctx, "teama")
	require.NoError(t, err)
	assert.NoError(t, g.CheckURL("http://10.1.2.3/"))
	assert.ErrorContains(t, g.CheckURL("http://10.9.0.1/"), "an admin can allow it in namespace teama's http_allow")
	g, err = p.GuardFor(ctx, "default")
	require.NoError(t, err)
	assert.NoError(t, g.CheckURL("http://10.9.0.1/"), "default, never set, has the operator's list")
}

// countingStore counts the namespace reads a policy makes of the real store.
type countingStore struct {
	outbound.Store
	reads atomic.Int64
}

func (c *countingStore) Namespace(ctx context.Context, name string) (store.Namespace, error) {
	c.reads.Add(1)
	return c.Store.Namespace(ctx, name)
}

// A slot's calls, made at once, read their namespace's allowance once between them, and an
// allowance changed later is read again by the first call after a second.
func TestGuardIsReadOnceForASlotsCalls(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, _ := testdb.Open(t, store.Options{})
	guard, err := targets.NewGuard([]string{"10.0.0.0/8"})
	require.NoError(t, err)
	counted := &countingStore{Store: db.DB}
	p := outbound.New(guard, declare(t, nil), nil, counted)
	_, _, err = db.PutNamespace(ctx, store.Namespace{Name: "teama", HTTPAllow: &[]string{"10.1.0.0/16"}})
	require.NoError(t, err)

	var wg sync.WaitGroup
	for range 200 {
		wg.Go(func() {
			g, err := p.GuardFor(ctx, "teama")
			assert.NoError(t, err)
			assert.NoError(t, g.CheckURL("http://10.1.2.3/"))
		})
	}
	wg.Wait()
	assert.Equal(t, int64(1), counted.reads.Load(), "one read for the 200 calls")

	_, _, err = db.PutNamespace(ctx, store.Namespace{Name: "teama", HTTPAllow: &[]string{}})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		g, err := p.GuardFor(ctx, "teama")
		return err == nil && g.CheckURL("http://10.1.2.3/") != nil
	}, 3*time.Second, 50*time.Millisecond, "the allowance taken away holds within a second or so")
}
