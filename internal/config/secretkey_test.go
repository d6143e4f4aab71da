package config_test

import (
	"encoding/base64"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func testKey(fill byte) string {
	return base64.StdEncoding.EncodeToString([]byte(strings.Repeat(string(fill), 32)))
}

func TestSecretKeys(t *testing.T) {
	c, err := load(t)
	require.NoError(t, err)
	assert.False(t, c.Runtime.SecretBox.CanSeal(), "no key: nothing is sealed, and the replica still starts")

	c, err = load(t, "SCHEDULER_SECRET_KEY="+testKey('a'), "SCHEDULER_SECRET_KEY_PREVIOUS="+testKey('b')+", "+testKey('c'),
		"SCHEDULER_SECRET_BILLING_TOKEN=v")
	require.NoError(t, err)
	assert.True(t, c.Runtime.SecretBox.CanSeal())
	assert.Len(t, c.Runtime.SecretBox.CurrentID(), 8)
	assert.Equal(t, map[string]string{"BILLING_TOKEN": "v"}, c.Runtime.Secrets, "the keys are not secrets named KEY and KEY_PREVIOUS")
}

// A bad key is reported with the other problems, by name, never by value.
func TestBadSecretKeysAreReportedWithoutTheirValue(t *testing.T) {
	short := base64.StdEncoding.EncodeToString([]byte("sixteen-byte-key"))
	_, err := load(t, "SCHEDULER_SECRET_KEY="+short, "SCHEDULER_SECRET_KEY_PREVIOUS="+testKey('b')+",not-base64!", "SCHEDULER_LOG_LEVEL=loud")
	got := lines(err)
	require.Len(t, got, 3, "%v", got)
	joined := strings.Join(got, "\n")
	assert.Contains(t, joined, "SCHEDULER_SECRET_KEY=\"(hidden)\" is not valid: want 32 random bytes in standard base64, as `openssl rand -base64 32` prints them (it is 16 bytes once decoded; a key is 32)")
	assert.Contains(t, joined, "SCHEDULER_SECRET_KEY_PREVIOUS=\"(hidden)\" is not valid")
	assert.Contains(t, joined, "entry 2 is not standard base64")
	assert.NotContains(t, joined, short)
	assert.NotContains(t, joined, testKey('b'))

	_, err = load(t, "SCHEDULER_SECRET_KEY_PREVIOUS="+testKey('b'))
	require.Len(t, lines(err), 1)
	assert.Contains(t, err.Error(), "SCHEDULER_SECRET_KEY is not set: want 32 random bytes")
}
