package runtimejob_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schedulerhq/scheduler/internal/runtimejob"
)

// http.completion and http.heartbeat_timeout: response is the default and is stored left
// out (definitions from before callbacks keep their normal form); callback takes a heartbeat
// timeout of 5m or the job's timeout; every wrong value is refused with its field.
func TestCompletionModes(t *testing.T) {
	check := func(http string) (*runtimejob.Checked, runtimejob.Errors) {
		return runtimejob.Check(decode(t, `{"name": "j", "schedule": "@hourly", "timeout": "2m", "http": {"url": "https://x.example.com", `+http+`}}`), env())
	}
	j, errs := check(`"completion": "response"`)
	require.Empty(t, errs)
	assert.Empty(t, j.Def.HTTP.Completion)
	assert.False(t, j.IsCallback())

	j, errs = check(`"completion": "callback"`)
	require.Empty(t, errs)
	assert.True(t, j.IsCallback())
	assert.Equal(t, 2*time.Minute, j.HeartbeatTimeout, "the job's timeout, shorter than 5m")
	assert.Equal(t, "2m", j.Def.HTTP.HeartbeatTimeout)

	j, errs = check(`"completion": "callback", "heartbeat_timeout": "30s"`)
	require.Empty(t, errs)
	assert.Equal(t, 30*time.Second, j.HeartbeatTimeout)

	for body, field := range map[string]string{
		`"completion": "webhook"`:                             "http.completion",
		`"heartbeat_timeout": "30s"`:                          "http.heartbeat_timeout",
		`"completion": "callback", "heartbeat_timeout": "5m"`: "http.heartbeat_timeout",
		`"completion": "callback", "heartbeat_timeout": "0s"`: "http.heartbeat_timeout",
	} {
		_, errs := check(body)
		require.Len(t, errs, 1, body)
		assert.Equal(t, field, errs[0].Field, body)
	}
}
