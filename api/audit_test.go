package api

import (
	"fmt"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// auditRows lists GET /v1/audit?query as who, after checking the answer is a 200.
func (tm *team) auditRows(who, query string) []map[string]any {
	tm.t.Helper()
	res := tm.as(who, "GET", "/v1/audit?"+query, "")
	require.Equal(tm.t, http.StatusOK, res.Status, "%s", res.Body)
	var rows []map[string]any
	for _, a := range res.JSON(tm.t)["actions"].([]any) {
		rows = append(rows, a.(map[string]any))
	}
	return rows
}

// A deleted job's history and its audit rows stay readable to whoever may read its
// namespace, and to nobody else: a viewer of another namespace is refused both, by name
// and by filter.
func TestDeletedJobHistoryAndAuditStayInTheirNamespace(t *testing.T) {
	tm := newTeam(t)
	res := tm.do("DELETE", "/v1/namespaces/ops/jobs/report", "", header{"X-Reason": "moved%20to%20cron"})
	require.Equal(t, http.StatusNoContent, res.Status, "%s", res.Body)
	require.Equal(t, http.StatusNotFound, tm.as("ops-editor", "GET", "/v1/namespaces/ops/jobs/report", "").Status)

	// Its owner reads its runs and when, by whom and why it was deleted.
	res = tm.as("ops-editor", "GET", "/v1/namespaces/ops/jobs/report/runs", "")
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	assert.Equal(t, []any{tm.runs["ops"]}, stringIDs(pluck(res.JSON(t)["runs"], "id")))
	rows := tm.auditRows("ops-editor", "namespace=ops&job=report&action=delete")
	require.Len(t, rows, 1)
	assert.Equal(t, "moved to cron", rows[0]["reason"])
	assert.Equal(t, "report", rows[0]["job"])
	assert.NotNil(t, rows[0]["detail"].(map[string]any)["before"])

	// Another namespace's viewer: refused by name, and its filters find only its own rows.
	for _, path := range []string{"/v1/namespaces/ops/jobs/report/runs", "/v1/audit?namespace=ops", "/v1/audit?namespace=ops&job=report"} {
		assert.Equal(t, http.StatusForbidden, tm.as("billing-viewer", "GET", path, "").Status, path)
	}
	for _, row := range tm.auditRows("billing-viewer", "job=report") {
		assert.Equal(t, "billing", row["namespace"], "billing's viewer reads %v", row)
	}
	assert.Empty(t, tm.auditRows("billing-viewer", "action=delete"), "billing's viewer reads ops' delete")
	// A viewer may not delete, with or without a reason.
	res = tm.as("billing-viewer", "DELETE", "/v1/namespaces/billing/jobs/report", "")
	assert.Equal(t, http.StatusForbidden, res.Status)
}

// stringIDs writes run ids as newTeam keeps them.
func stringIDs(ids []any) []any {
	out := make([]any, len(ids))
	for i, id := range ids {
		out[i] = fmt.Sprintf("%.0f", id)
	}
	return out
}

// The audit log's filters: job, action, token, since and until narrow the list, a cursor
// keeps them, and every wrong filter is listed in one 400.
func TestAuditFilters(t *testing.T) {
	start := time.Now().UTC().Add(-time.Second) // before any row
	tm := newTeam(t)
	res := tm.as("billing-editor", "PUT", "/v1/namespaces/billing/jobs/report", httpJob("report").replaceSchedule("0 3 * * *"))
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	res = tm.do("POST", "/v1/namespaces/billing/jobs/report/pause", `{"reason": "quarter end"}`, nil)
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)

	rows := tm.auditRows("admin", "job=report&action=update")
	require.Len(t, rows, 1)
	assert.Equal(t, "be", rows[0]["token_name"])
	detail := rows[0]["detail"].(map[string]any)
	assert.Equal(t, "0 2 * * *", detail["before"].(map[string]any)["schedule"])
	assert.Equal(t, "0 3 * * *", detail["after"].(map[string]any)["schedule"])

	assert.Len(t, tm.auditRows("admin", "token=be"), 1, "billing's editor acted once")
	full := tm.auditRows("admin", "token=full")
	assert.Len(t, full, 10, "the environment's token made the namespaces, jobs, runs and tokens and paused")
	for _, row := range full {
		assert.Equal(t, "full", row["token_kind"])
	}
	assert.Len(t, tm.auditRows("admin", "job=report&namespace=billing"), 4, "billing's report: create, trigger, update, pause")
	assert.Len(t, tm.auditRows("admin", "job=report"), 6, "both reports: create and trigger in ops too")
	assert.Len(t, tm.auditRows("admin", "job=report&since="+url.QueryEscape(time.Now().UTC().Add(time.Hour).Format(time.RFC3339))), 0)
	assert.Len(t, tm.auditRows("admin", "job=report&until="+url.QueryEscape(start.Format(time.RFC3339Nano))), 0)

	// Pages keep their filters; a cursor of other filters is refused.
	res = tm.as("admin", "GET", "/v1/audit?job=report&limit=4", "")
	require.Equal(t, http.StatusOK, res.Status)
	next := res.JSON(t)["next_cursor"].(string)
	assert.Len(t, tm.auditRows("admin", "job=report&limit=4&cursor="+next), 2)
	res = tm.as("admin", "GET", "/v1/audit?action=pause&cursor="+next, "")
	assert.Equal(t, http.StatusBadRequest, res.Status)
	assert.Equal(t, "invalid-cursor", res.problemType(t))

	res = tm.as("admin", "GET", "/v1/audit?job=Not%20a%20name&action=explode&since=yesterday&until=2025-01-01T00:00:00Z&token=", "")
	require.Equal(t, http.StatusBadRequest, res.Status, "%s", res.Body)
	var fields []string
	for _, e := range res.JSON(t)["errors"].([]any) {
		fields = append(fields, e.(map[string]any)["field"].(string))
	}
	assert.Equal(t, []string{"job", "action", "since"}, fields)
	res = tm.as("admin", "GET", "/v1/audit?since=2025-01-02T00:00:00Z&until=2025-01-01T00:00:00Z", "")
	assert.Equal(t, http.StatusBadRequest, res.Status)
	assert.Equal(t, "since", res.problemField(t))
}

// A runtime job's create, replace and delete keep the reason of their X-Reason header,
// percent-encoded UTF-8; one that is not valid percent-encoding changes nothing.
func TestDefinitionChangesKeepTheirReason(t *testing.T) {
	tm := newTeam(t)
	res := tm.do("POST", "/v1/namespaces/billing/jobs", string(httpJob("sync")), header{"X-Reason": "new%20feed%20%E2%9C%93"})
	require.Equal(t, http.StatusCreated, res.Status, "%s", res.Body)
	res = tm.do("PUT", "/v1/namespaces/billing/jobs/sync", httpJob("sync").replaceSchedule("0 4 * * *"), header{"X-Reason": "later"})
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	res = tm.do("DELETE", "/v1/namespaces/billing/jobs/sync", "", header{"X-Reason": "50%"})
	require.Equal(t, http.StatusBadRequest, res.Status, "%s", res.Body)
	assert.Equal(t, "X-Reason", res.problemField(t))
	require.Equal(t, http.StatusOK, tm.do("GET", "/v1/namespaces/billing/jobs/sync", "", nil).Status, "a refused delete deleted")
	res = tm.do("DELETE", "/v1/namespaces/billing/jobs/sync", "", header{"X-Reason": "50%25%20done"})
	require.Equal(t, http.StatusNoContent, res.Status, "%s", res.Body)

	rows := tm.auditRows("admin", "namespace=billing&job=sync")
	require.Len(t, rows, 3)
	assert.Equal(t, []any{"delete", "update", "create"}, pluck(toAny(rows), "action"))
	assert.Equal(t, []any{"50% done", "later", "new feed ✓"}, pluck(toAny(rows), "reason"))
}

func toAny(rows []map[string]any) []any {
	out := make([]any, len(rows))
	for i, r := range rows {
		out[i] = r
	}
	return out
}
