package api

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A drain names a known replica, is admin's only, and writes its control row with its audit
// row; an unknown replica is 404 and records nothing.
func TestDrainAReplica(t *testing.T) {
	t.Parallel()
	a := newAccessAPI(t)
	res := a.do("POST", "/v1/instances/nobody/drain", `{"reason": "node upgrade"}`, nil)
	require.Equal(t, http.StatusNotFound, res.Status, "body: %s", res.Body)
	assert.Equal(t, "instance-not-found", res.problemType(t))
	assert.Contains(t, res.JSON(t)["detail"], "GET /v1/instances")

	a.exec(`INSERT INTO scheduler_instances (instance_id, host, version, http_addr, started_at, last_seen_at, is_leader)
		VALUES ('r1', 'h', 'v', ':8080', now() - interval '1 minute', now(), false)`)
	res = a.do("POST", "/v1/instances/r1/drain", `{"reason": "node upgrade"}`, header{"Authorization": "Bearer " + testReadToken})
	require.Equal(t, http.StatusForbidden, res.Status, "body: %s", res.Body)
	assert.Zero(t, a.count(`SELECT count(*) FROM scheduler_control`))

	res = a.do("POST", "/v1/instances/r1/drain", `{"reason": "node upgrade"}`, nil)
	require.Equal(t, http.StatusAccepted, res.Status, "body: %s", res.Body)
	assert.Equal(t, map[string]any{"instance_id": "r1"}, res.JSON(t))
	assert.Equal(t, 1, a.count(`SELECT count(*) FROM scheduler_control WHERE kind = 'drain' AND instance_id = 'r1'
		AND reason = 'node upgrade' AND handled_at IS NULL`))
	assert.Equal(t, 1, a.count(`SELECT count(*) FROM operator_actions WHERE action = 'drain' AND reason = 'node upgrade'`))
	drained, err := a.db.Drained(t.Context(), "r1")
	require.NoError(t, err)
	assert.True(t, drained)

	// A restart (a later started_at) ends the drain.
	a.exec(`UPDATE scheduler_instances SET started_at = now() + interval '1 second' WHERE instance_id = 'r1'`)
	drained, err = a.db.Drained(t.Context(), "r1")
	require.NoError(t, err)
	assert.False(t, drained)
}
