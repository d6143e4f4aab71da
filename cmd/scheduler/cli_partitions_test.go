package main

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// partitions shows each replica's count and each partition's holder, and says in words what
// a partition without a holder means and what to do about it.
func TestPartitionsShowsWhoLeadsWhat(t *testing.T) {
	t.Parallel()
	ts := time.Now().UTC().Add(-time.Minute).Format(time.RFC3339Nano)
	_, u := startFakeAPI(t, `{}`, func(w http.ResponseWriter, r *http.Request) bool {
		if r.URL.Path != "/v1/partitions" {
			return false
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"count":3,"partitions":[
			{"partition":0,"holder":"r1","last_holder":"r1","epoch":4,"term_id":"6f1c2a52-8b6e-4d51-9f0e-3d2b7c1a4e90","since":"` + ts + `","renewed_at":"` + ts + `","handovers":0,"jobs":5,"coordinator":true},
			{"partition":1,"holder":null,"last_holder":"r2","epoch":7,"term_id":"6f1c2a52-8b6e-4d51-9f0e-3d2b7c1a4e91","since":"` + ts + `","renewed_at":"` + ts + `","handovers":3,"jobs":12,"coordinator":false},
			{"partition":2,"holder":"r1","last_holder":"r1","epoch":2,"term_id":"6f1c2a52-8b6e-4d51-9f0e-3d2b7c1a4e92","since":"` + ts + `","renewed_at":"` + ts + `","handovers":1,"jobs":9,"coordinator":false}],
			"replicas":[{"instance_id":"r1","partitions":2,"coordinator":true,"is_self":true},{"instance_id":"r2","partitions":0,"coordinator":false,"is_self":false}]}`))
		return true
	})
	code, out, stderr := runCLI(t, []string{"SCHEDULER_URL=" + u}, "partitions")
	require.Equal(t, exitOK, code, stderr)
	assert.Contains(t, out, "Partitions: 3. Runtime jobs hash by name onto them")
	assert.Regexp(t, `(?m)^r1 \(answering\)\s+2\s+yes$`, out)
	assert.Regexp(t, `(?m)^r2\s+0\s*$`, out)
	assert.Regexp(t, `(?m)^0 \(coordinator\)\s+r1\s+4\s.*\s5\s+-$`, out)
	assert.Regexp(t, `(?m)^1\s+none \(was r2\)\s+7\s.*\(1m0s ago\)\s+12\s+3$`, out)
	assert.Regexp(t, `(?m)^2\s+r1\s+2\s`, out)
	assert.Contains(t, out, "1 partition(s) have no holder, and their jobs do not run")

	code, out, stderr = runCLI(t, []string{"SCHEDULER_URL=" + u}, "partitions", "-o", "json")
	require.Equal(t, exitOK, code, stderr)
	var p struct{ Count int }
	require.NoError(t, json.Unmarshal([]byte(out), &p))
	assert.Equal(t, 3, p.Count)
}
