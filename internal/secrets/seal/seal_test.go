package seal_test

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schedulerhq/scheduler/internal/secrets/seal"
)

func newKey(t *testing.T) (*seal.Key, string) {
	t.Helper()
	raw := make([]byte, seal.KeySize)
	_, err := rand.Read(raw)
	require.NoError(t, err)
	encoded := base64.StdEncoding.EncodeToString(raw)
	k, err := seal.ParseKey(encoded)
	require.NoError(t, err)
	return k, encoded
}

func TestSealOpenRoundTripWithAFreshNonceEachTime(t *testing.T) {
	k, _ := newKey(t)
	b := seal.New(k)
	id, sealed, err := b.Seal("billing", "TOKEN", []byte("the value"))
	require.NoError(t, err)
	assert.Equal(t, k.ID(), id)
	assert.Len(t, id, 8)
	assert.NotContains(t, string(sealed), "the value")
	_, again, err := b.Seal("billing", "TOKEN", []byte("the value"))
	require.NoError(t, err)
	assert.NotEqual(t, sealed, again, "each seal draws its own nonce")

	value, err := b.Open("billing", "TOKEN", id, sealed)
	require.NoError(t, err)
	assert.Equal(t, "the value", string(value))
}

// A sealed value is bound to its row: copied to another namespace or name, it does not open.
func TestSealedValueDoesNotOpenInAnotherRow(t *testing.T) {
	k, _ := newKey(t)
	b := seal.New(k)
	id, sealed, err := b.Seal("ops", "DEPLOY_TOKEN", []byte("ops only"))
	require.NoError(t, err)
	for _, row := range [][2]string{{"billing", "DEPLOY_TOKEN"}, {"ops", "OTHER"}, {"opsD", "EPLOY_TOKEN"}} {
		_, err := b.Open(row[0], row[1], id, sealed)
		var oe *seal.OpenError
		require.ErrorAs(t, err, &oe, "row %v", row)
		assert.Contains(t, err.Error(), "not sealed for this row")
	}
	tampered := bytes.Clone(sealed)
	tampered[len(tampered)-1] ^= 1
	_, err = b.Open("ops", "DEPLOY_TOKEN", id, tampered)
	assert.Error(t, err)
}

// A previous key opens what it sealed; the box seals with the current key only.
func TestPreviousKeysOpenAndNeverSeal(t *testing.T) {
	old, _ := newKey(t)
	cur, _ := newKey(t)
	oldID, sealed, err := seal.New(old).Seal("default", "X", []byte("v"))
	require.NoError(t, err)

	b := seal.New(cur, old)
	v, err := b.Open("default", "X", oldID, sealed)
	require.NoError(t, err)
	assert.Equal(t, "v", string(v))
	id, _, err := b.Seal("default", "X", []byte("v"))
	require.NoError(t, err)
	assert.Equal(t, cur.ID(), id)

	_, err = seal.New(cur).Open("default", "X", oldID, sealed)
	require.Error(t, err)
	assert.Contains(t, err.Error(), oldID)
	assert.Contains(t, err.Error(), "SCHEDULER_SECRET_KEY_PREVIOUS")
}

func TestWithoutAKeyNothingSealsAndTheErrorSaysHowToMakeOne(t *testing.T) {
	b := seal.New(nil)
	assert.False(t, b.CanSeal())
	_, _, err := b.Seal("default", "X", []byte("v"))
	require.ErrorIs(t, err, seal.ErrNoKey)
	assert.Contains(t, err.Error(), "SCHEDULER_SECRET_KEY")
	assert.Contains(t, err.Error(), "openssl rand -base64 32")
	_, err = b.Open("default", "X", "00000000", []byte("whatever-long-enough-to-be-sealed"))
	assert.Contains(t, err.Error(), "openssl rand -base64 32")
}

func TestParseKeyRefusesWithoutRepeatingTheValue(t *testing.T) {
	short := base64.StdEncoding.EncodeToString([]byte("sixteen-byte-key"))
	for _, bad := range []string{"not base64 !!", short} {
		_, err := seal.ParseKey(bad)
		require.Error(t, err)
		assert.NotContains(t, err.Error(), bad)
	}
}

// A key or a box printed by mistake shows ids only.
func TestKeysPrintAsTheirIDs(t *testing.T) {
	k, encoded := newKey(t)
	raw, _ := base64.StdEncoding.DecodeString(encoded)
	b := seal.New(k)
	for _, s := range []string{fmt.Sprint(k), fmt.Sprintf("%v %+v %#v", b, b, k), fmt.Sprintf("%s", errors.New(b.String()))} {
		assert.NotContains(t, s, encoded)
		assert.False(t, bytes.Contains([]byte(s), raw))
		assert.Contains(t, s, k.ID())
	}
}
