package store_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schedulerhq/scheduler/internal/store"
	"github.com/schedulerhq/scheduler/internal/testdb"
)

func sealed(ns, name, keyID, value string, hosts ...string) store.SealedSecret {
	return store.SealedSecret{Secret: store.Secret{Namespace: ns, Name: name, KeyID: keyID, AllowedHosts: hosts}, Sealed: []byte(value)}
}

func TestSecretsPutGetListDelete(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, _ := testdb.Open(t, store.Options{})
	_, _, err := db.PutNamespace(ctx, store.Namespace{Name: "billing"})
	require.NoError(t, err)

	s, created, err := db.PutSecret(ctx, sealed("billing", "TOKEN", "k1", "sealed-1", "api.example.com"))
	require.NoError(t, err)
	assert.True(t, created)
	assert.Equal(t, int64(1), s.Version)
	assert.Equal(t, []string{"api.example.com"}, s.AllowedHosts)

	s, created, err = db.PutSecret(ctx, sealed("billing", "TOKEN", "k2", "sealed-2", "api.example.com:8443", "b.example.com"))
	require.NoError(t, err)
	assert.False(t, created, "a put of an existing name replaces it")
	assert.Equal(t, int64(2), s.Version)
	assert.Equal(t, "k2", s.KeyID)
	assert.False(t, s.UpdatedAt.Before(s.CreatedAt))

	_, _, err = db.PutSecret(ctx, sealed("billing", "AAA", "k2", "sealed-3", "x.example.com"))
	require.NoError(t, err)
	list, err := db.Secrets(ctx, "billing")
	require.NoError(t, err)
	require.Len(t, list, 2)
	assert.Equal(t, []string{"AAA", "TOKEN"}, []string{list[0].Name, list[1].Name}, "by name")
	none, err := db.Secrets(ctx, "default")
	require.NoError(t, err)
	assert.Empty(t, none, "a namespace sees its own secrets only")

	got, err := db.SealedSecrets(ctx, "billing", []string{"TOKEN", "MISSING"})
	require.NoError(t, err)
	require.Len(t, got, 1)
	assert.Equal(t, "sealed-2", string(got[0].Sealed))
	assert.Equal(t, int64(2), got[0].Version)

	one, err := db.Secret(ctx, "billing", "TOKEN")
	require.NoError(t, err)
	assert.Equal(t, s, one)
	_, err = db.Secret(ctx, "default", "TOKEN")
	assert.ErrorIs(t, err, store.ErrSecretNotFound)

	_, _, err = db.PutSecret(ctx, sealed("nowhere", "TOKEN", "k1", "x", "a.example.com"))
	assert.ErrorIs(t, err, store.ErrNamespaceNotFound)

	deleted, err := db.DeleteSecret(ctx, "billing", "TOKEN")
	require.NoError(t, err)
	assert.Equal(t, int64(2), deleted.Version)
	_, err = db.DeleteSecret(ctx, "billing", "TOKEN")
	assert.ErrorIs(t, err, store.ErrSecretNotFound)
}

// A rotation pages through the rows of other keys, and re-seals a row only as it read it: a
// put made meanwhile is never overwritten with the older value.
func TestSecretsReseal(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, _ := testdb.Open(t, store.Options{})
	for _, name := range []string{"A", "B", "C"} {
		_, _, err := db.PutSecret(ctx, sealed("default", name, "old", "sealed-"+name, "a.example.com"))
		require.NoError(t, err)
	}
	_, _, err := db.PutSecret(ctx, sealed("default", "D", "new", "sealed-D", "a.example.com"))
	require.NoError(t, err)

	page, err := db.SecretsToReseal(ctx, "new", "", "", 2)
	require.NoError(t, err)
	require.Len(t, page, 2)
	assert.Equal(t, "A", page[0].Name)
	rest, err := db.SecretsToReseal(ctx, "new", page[1].Namespace, page[1].Name, 2)
	require.NoError(t, err)
	require.Len(t, rest, 1)
	assert.Equal(t, "C", rest[0].Name)

	ok, err := db.ResealSecret(ctx, page[0], "new", []byte("resealed-A"))
	require.NoError(t, err)
	assert.True(t, ok)
	ok, err = db.ResealSecret(ctx, page[0], "new", []byte("resealed-A"))
	require.NoError(t, err)
	assert.False(t, ok, "the row is no longer as it was read")

	_, _, err = db.PutSecret(ctx, sealed("default", "B", "new", "put-meanwhile", "a.example.com"))
	require.NoError(t, err)
	ok, err = db.ResealSecret(ctx, page[1], "new", []byte("stale"))
	require.NoError(t, err)
	assert.False(t, ok)
	got, err := db.SealedSecrets(ctx, "default", []string{"A", "B"})
	require.NoError(t, err)
	values := map[string]string{}
	for _, s := range got {
		values[s.Name] = string(s.Sealed)
		if s.Name == "A" {
			assert.Equal(t, int64(1), s.Version, "a re-seal keeps the version: the value is the same")
		}
	}
	assert.Equal(t, map[string]string{"A": "resealed-A", "B": "put-meanwhile"}, values)

	ids, err := db.SecretKeyIDs(ctx)
	require.NoError(t, err)
	assert.Equal(t, map[string]int{"new": 3, "old": 1}, ids)
}

func TestNamespaceCallLimits(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, _ := testdb.Open(t, store.Options{})
	two := 2
	_, _, err := db.PutNamespace(ctx, store.Namespace{Name: "billing", MaxConcurrentCalls: &two})
	require.NoError(t, err)
	_, _, err = db.PutNamespace(ctx, store.Namespace{Name: "ops"})
	require.NoError(t, err)
	limits, err := db.NamespaceCallLimits(ctx)
	require.NoError(t, err)
	assert.Equal(t, map[string]int{"billing": 2}, limits)
}
