package store_test

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schedulerhq/scheduler/internal/store"
	"github.com/schedulerhq/scheduler/internal/testdb"
)

// An operator's pool_max_conns in DATABASE_URL sizes the replica's pool, and is never sent
// to the server (which refuses it), by the pool or by the migrations; without it the pool
// has 10 connections, and a caller's Options.MaxConns wins over both.
func TestPoolSizeFollowsTheURL(t *testing.T) {
	url := testdb.New(t)
	withParam := func(u, p string) string {
		if strings.Contains(u, "?") {
			return u + "&" + p
		}
		return u + "?" + p
	}
	for _, c := range []struct {
		name string
		url  string
		opt  int32
		want int32
	}{
		{"default", url, 0, 10},
		{"the URL's", withParam(url, "pool_max_conns=3"), 0, 3},
		{"the caller's", withParam(url, "pool_max_conns=3"), 2, 2},
	} {
		t.Run(c.name, func(t *testing.T) {
			db, err := store.Open(context.Background(), c.url, store.Options{InstanceID: "pool", LeaseTimeout: 5e9, MaxConns: c.opt})
			require.NoError(t, err)
			defer db.Close()
			assert.Equal(t, c.want, store.PoolMaxConns(db))
			_, err = db.Definitions(context.Background())
			require.NoError(t, err, "the pool's settings are not sent to the server")
		})
	}
}

// The migrations connect with the URL's pool settings left out too.
func TestMigratorIgnoresThePoolSettings(t *testing.T) {
	url := testdb.New(t)
	sep := "?"
	if strings.Contains(url, "?") {
		sep = "&"
	}
	m, err := store.NewMigrator(url + sep + "pool_max_conns=3")
	require.NoError(t, err)
	defer m.Close()
	v, _, err := m.Version()
	require.NoError(t, err)
	assert.Equal(t, store.SchemaVersion(), v)
}
