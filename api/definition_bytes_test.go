package api

import (
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestDefinitionFieldsRefuseBadBytes: a NUL (which PostgreSQL cannot store) in any string
// of a definition, and a control character in a header, is the caller's mistake: 400 or
// 422, never a 503, whether the definition is created or dry-run.
func TestDefinitionFieldsRefuseBadBytes(t *testing.T) {
	t.Parallel()
	a := newRuntimeAPI(t, 0)
	const http1 = `{"name": "n", "schedule": "0 2 * * *", "http": {"url": "https://billing.internal/x"}}`
	const sql1 = `{"name": "n", "schedule": "0 2 * * *", "sql": {"target": "APP", "statements": "SELECT 1"}}`
	// Each variant holds BAD where a string goes.
	variants := []string{
		`{"name": "BAD", "schedule": "0 2 * * *", "http": {"url": "https://billing.internal/x"}}`,
		`{"name": "n", "namespace": "BAD", "schedule": "0 2 * * *", "http": {"url": "https://billing.internal/x"}}`,
		`{"name": "n", "schedule": "0 2 * * BAD", "http": {"url": "https://billing.internal/x"}}`,
		`{"name": "n", "schedule": ["0 2 * * *", "BAD"], "http": {"url": "https://billing.internal/x"}}`,
		`{"name": "n", "schedule": "0 2 * * *", "time_zone": "Europe/BAD", "http": {"url": "https://billing.internal/x"}}`,
		`{"name": "n", "schedule": "0 2 * * *", "dst": {"gap": "BAD", "repeat": "BAD"}, "http": {"url": "https://billing.internal/x"}}`,
		`{"name": "n", "schedule": "0 2 * * *", "start_at": "2030-01-01T00:00:00ZBAD", "end_at": "BAD", "http": {"url": "https://billing.internal/x"}}`,
		`{"name": "n", "schedule": "0 2 * * *", "description": "BAD", "http": {"url": "https://billing.internal/x"}}`,
		`{"name": "n", "schedule": "0 2 * * *", "labels": {"BAD": "v", "team": "BAD"}, "http": {"url": "https://billing.internal/x"}}`,
		`{"name": "n", "schedule": "0 2 * * *", "timeout": "BAD", "catchup": "BAD", "min_gap": "BAD", "jitter": "BAD", "overlap": "BAD", "http": {"url": "https://billing.internal/x"}}`,
		`{"name": "n", "schedule": "0 2 * * *", "retry": {"max_attempts": 2, "initial_backoff": "BAD", "max_backoff": "BAD"}, "http": {"url": "https://billing.internal/x"}}`,
		`{"name": "n", "schedule": "0 2 * * *", "http": {"method": "BAD", "url": "https://billing.internal/BAD"}}`,
		`{"name": "n", "schedule": "0 2 * * *", "http": {"url": "https://billing.internal/x", "headers": {"X-BAD": "v", "X-A": "BAD"}}}`,
		`{"name": "n", "schedule": "0 2 * * *", "http": {"url": "https://billing.internal/x", "body": "BAD", "timeout": "BAD"}}`,
		`{"name": "n", "schedule": "0 2 * * *", "http": {"url": "https://billing.internal/x", "auth": {"bearer_secret": "BAD"}, "signing_secret": "BAD"}}`,
		`{"name": "n", "schedule": "0 2 * * *", "http": {"url": "https://billing.internal/x", "auth": {"header": "X-BAD", "header_secret": "BAD"}}}`,
		`{"name": "n", "schedule": "0 2 * * *", "http": {"url": "https://billing.internal/x", "completion": "BAD", "heartbeat_timeout": "BAD"}}`,
		`{"name": "n", "schedule": "0 2 * * *", "sql": {"target": "BAD", "statements": "SELECT 'BAD'"}}`,
		`{"name": "n", "schedule": "0 2 * * *", "notify": [{"on": ["BAD"], "webhook": {"url": "https://hooks.example/BAD", "signing_secret": "BAD"}}], "http": {"url": "https://billing.internal/x"}}`,
		`{"name": "n", "schedule": "0 2 * * *", "notify": [{"on": ["failed"], "slack": {"url_secret": "BAD"}}], "http": {"url": "https://billing.internal/x"}}`,
	}
	for _, bad := range []string{`a\u0000b`, `\u0000`} {
		for _, v := range variants {
			body := strings.ReplaceAll(v, "BAD", bad)
			for _, path := range []string{"/v1/jobs?dry_run=true", "/v1/jobs"} {
				res := a.do("POST", path, body, nil)
				assert.Contains(t, []int{http.StatusBadRequest, http.StatusUnprocessableEntity}, res.Status, "%s %s: %s", path, body, res.Body)
			}
		}
	}
	// A control character in a header would fail every call: refused too.
	res := a.do("POST", "/v1/jobs", `{"name": "n", "schedule": "0 2 * * *", "http": {"url": "https://billing.internal/x", "headers": {"X-A": "a\u0001b"}}}`, nil)
	assert.Equal(t, http.StatusUnprocessableEntity, res.Status, "%s", res.Body)
	assert.Equal(t, "http.headers.X-A", res.problemField(t))
	for _, good := range []string{http1, sql1} {
		res := a.do("POST", "/v1/jobs?dry_run=true", good, nil)
		assert.Less(t, res.Status, 300, "%s: %s", good, res.Body)
	}
}
