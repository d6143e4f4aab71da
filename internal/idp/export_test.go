package idp

import (
	"context"
	"crypto"
	"encoding/json"
	"testing"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/stretchr/testify/require"
)

// PrivateKeysForTest opens every published key and returns its private scalar.
func (k *Keys) PrivateKeysForTest(ctx context.Context, t *testing.T) [][]byte {
	keys, err := k.c.DB.OIDCKeys(ctx, false)
	require.NoError(t, err)
	var out [][]byte
	for _, key := range keys {
		priv, err := k.open(key)
		require.NoError(t, err)
		d, err := priv.Bytes() // the private scalar, fixed-length for its curve
		require.NoError(t, err)
		out = append(out, d)
	}
	return out
}

// StatesForTest lists the published keys' states, in their order of life.
func (k *Keys) StatesForTest(ctx context.Context, t *testing.T) []string {
	keys, err := k.c.DB.OIDCKeys(ctx, false)
	require.NoError(t, err)
	var out []string
	for _, key := range keys {
		out = append(out, key.State)
	}
	return out
}

// PublicKeysForTest decodes a key set's keys.
func PublicKeysForTest(t *testing.T, raw []json.RawMessage) []crypto.PublicKey {
	var out []crypto.PublicKey
	for _, r := range raw {
		var jwk jose.JSONWebKey
		require.NoError(t, jwk.UnmarshalJSON(r))
		out = append(out, jwk.Key)
	}
	return out
}
