package api

import (
	"encoding/base64"
	"net/http"
	"net/url"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Text that PostgreSQL cannot store (a NUL, invalid UTF-8) in a cursor or a query parameter
// is the client's mistake: 400 naming the parameter, never a 503 and an ERROR line as if the
// database had failed (issue 28, 3).
func TestQueryTextPostgreSQLCannotStoreIsRefused(t *testing.T) {
	t.Parallel()
	a := newTestAPI(t)
	b64 := func(s string) string { return url.QueryEscape(base64.RawURLEncoding.EncodeToString([]byte(s))) }
	for path, field := range map[string]string{
		"/v1/jobs?cursor=" + b64("job.\x00"):                 "cursor",
		"/v1/jobs?cursor=" + b64("job.a\x00b"):               "cursor",
		"/v1/jobs?cursor=" + b64("job.\xff\xfe"):             "cursor",
		"/v1/jobs?limit=2&cursor=" + b64("job.plan\x00"):     "cursor",
		"/v1/jobs?cursor=%00":                                "cursor",
		"/v1/audit?cursor=" + b64("1\x00.audit"):             "cursor",
		"/v1/audit?cursor=%FF":                               "cursor",
		"/v1/jobs/plan-change/runs?cursor=" + b64("\x00.ab"): "cursor",
		"/v1/jobs/plan-change/runs?status=%00":               "status",
		"/v1/jobs/plan-change/runs?trigger=%FF":              "trigger",
		"/v1/jobs/plan-change/runs?since=%00":                "since",
		"/v1/jobs/plan-change/runs?limit=%00":                "limit",
	} {
		res := a.do("GET", path, "", nil)
		assert.Equal(t, http.StatusBadRequest, res.Status, "%s: %s", path, res.Body)
		if res.Status == http.StatusBadRequest {
			assert.Equal(t, "application/problem+json", res.Header.Get("Content-Type"), path)
			assert.Equal(t, field, res.problemField(t), path)
		}
	}
	// A body's reason is stored in the audit log's text column too.
	for _, path := range []string{"/v1/jobs/plan-change/runs", "/v1/jobs/plan-change/pause"} {
		res := a.do("POST", path, `{"reason":"a\u0000b"}`, nil)
		assert.Equal(t, http.StatusBadRequest, res.Status, "%s: %s", path, res.Body)
		if res.Status == http.StatusBadRequest {
			assert.Equal(t, "reason", res.problemField(t), path)
		}
	}
}

// A refused request is audited whatever its path holds: PostgreSQL refuses a NUL in text, so
// a path with %00 went unrecorded (issue 28, 4). The NUL is recorded as %00.
func TestRefusedRequestWithNULInItsPathIsAudited(t *testing.T) {
	t.Parallel()
	a := newTestAPI(t)
	res := a.do("GET", "/v1/jobs/a%00b/runs", "", header{"Authorization": "Bearer wrong"})
	require.Equal(t, http.StatusUnauthorized, res.Status)
	var reason string
	require.NoError(t, a.db.Pool.QueryRow(t.Context(),
		`SELECT reason FROM operator_actions WHERE action = 'refused'`).Scan(&reason), "the refusal is audited")
	assert.Equal(t, "unauthorized: GET /v1/jobs/a%00b/runs", reason)
}
