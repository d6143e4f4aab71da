package api

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/schedulerhq/scheduler/client"
	"github.com/schedulerhq/scheduler/internal/store"
	"github.com/schedulerhq/scheduler/internal/testdb"
)

// FuzzRequestInput sends arbitrary query strings, Idempotency-Key and Authorization headers
// (the valid token when empty),
// path segments and bodies to the routes that parse input. Whatever arrives, the answer is
// never a 5xx, never a panic, and every error is a problem+json body. The seed corpus runs
// in every `go test`; `go test -fuzz FuzzRequestInput ./api/` explores further.
func FuzzRequestInput(f *testing.F) {
	db, _ := testdb.Open(f, store.Options{InstanceID: testInstance})
	s := NewServer(Config{DB: db.DB, InstanceID: testInstance, Jobs: testJobs(f), APIToken: testToken})
	h := s.Handler()

	seeds := []struct {
		route                   uint8
		segment, query, key     string
		auth, contentType, body string
	}{
		{0, "plan-change", "", "", "Bearer " + testToken, "application/json", `{"reason":"x","params":{"dry_run":true}}`},
		{0, "plan-change", "wait=1ms", key1, "Bearer " + testToken, "", ``},
		{0, "plan-change", "wait=99999999999h", "", "Bearer " + testToken, "", `{}`},
		{0, "plan-change", "", "3F2504E0-4F89-41D3-9A0C-0305E82C3301", "Bearer " + testToken, "application/json", `{"params":null,"reason":null}`},
		{0, "plan-change", "", key1, "Bearer " + testToken, "application/json", `{"reason":"other"}`},
		{0, "status-sync", "", "", "Bearer " + testToken, "", ``},
		{0, "plan-change", "", "", "Bearer " + testToken, "text/plain; charset=%%", `{`},
		{0, "plan-change", "", "", "Bearer " + testToken, "application/json", `{"params":{"dry_run":"yes"}}`},
		{0, "plan-change", "", "", "Bearer " + testToken, "application/json", `{"reason":"\xff\xfe"}`},
		{0, "plan-change", "", "", "Bearer " + testToken, "application/json", `{"params":1e999}`},
		{0, "%00", "", "", "", "", ``},
		{1, "plan-change", "limit=3&status=failed&trigger=manual&since=2025-01-01T00:00:00Z&until=2030-01-01T00:00:00Z", "", "Bearer " + testToken, "", ``},
		{1, "plan-change", "cursor=" + encodeCursor(1, "000000000000"), "", "Bearer " + testToken, "", ``},
		{1, "plan-change", "cursor=MTg0NDY3NDQwNzM3MDk1NTE2MTYuYWJj&limit=-1", "", "Bearer " + testToken, "", ``},
		{1, "plan-change", "since=0000-01-01T00:00:00Z&until=9999-12-31T23:59:59.999999999Z", "", "Bearer " + testToken, "", ``},
		{1, "plan-change", "since=2025-01-01T00:00:00%2B99:00", "", "Bearer " + testToken, "", ``},
		{2, "1", "", "", "Bearer " + testToken, "", ``},
		{2, "-9223372036854775808", "", "", "Bearer " + testToken, "", ``},
		{3, "9223372036854775807", "", "", "Bearer " + testToken, "", ``},
		{4, "plan-change", "", "", "Bearer " + testToken, "", ``},
		{5, "", "", "", "Bearer " + testToken, "application/json", `{"name":"fuzz","schedule":"@every 1m","http":{"url":"https://a.example"}}`},
		{5, "", "dry_run=true", "", "Bearer " + testToken, "application/json", `{"name":"fuzz","schedule":"0 2 * * *","time_zone":"Europe/Paris","sql":{"statements":"SELECT 1"}}`},
		{5, "", "", "", "Bearer " + testToken, "application/json", `{"name":"x","description":"\u0000","schedule":"@every 1m","http":{"url":"https://a.example","body":"\u0000"}}`},
		{5, "", "", "", "Bearer " + testToken, "application/json", `{"name":"x","schedule":"@every 1m","retry":{"max_attempts":1e999}}`},
		{6, "fuzz", "", "", "Bearer " + testToken, "application/json", `{"schedule":"@every 1m","http":{"url":"https://a.example","method":"PATCH"}}`},
		{6, "plan-change", "", "", "Bearer " + testToken, "application/json", `{"schedule":"@every 1m"}`},
		{6, "%00", "dry_run=true", "", "Bearer " + testToken, "application/json", `{"schedule":"@every 1m"}`},
		{7, "fuzz", "", "", "Bearer " + testToken, "", ``},
		{7, "%00", "", "", "Bearer " + testToken, "", ``},
		{8, "", "limit=2&cursor=" + encodeJobCursor("plan-change"), "", "Bearer " + testToken, "", ``},
		{8, "", "cursor=" + encodeJobCursor("a\x00b"), "", "Bearer " + testToken, "", ``},
		{8, "", "cursor=" + encodeJobCursor("\xff"), "", "Bearer " + testToken, "", ``},
		{9, "", "limit=1&cursor=" + encodeCursor(1, auditCursorScope), "", "Bearer " + testToken, "", ``},
		{9, "", "cursor=%00", "", "Bearer " + testToken, "", ``},
		{0, "plan-change", "", "", "Bearer " + testToken, "application/json", `{"reason":"\u0000"}`},
		{4, "%00", "", "", "Bearer wrong", "", ``},
	}
	for _, s := range seeds {
		f.Add(s.route, s.segment, s.query, s.key, s.auth, s.contentType, []byte(s.body))
	}

	f.Fuzz(func(t *testing.T, route uint8, segment, query, key, auth, contentType string, body []byte) {
		seg := url.PathEscape(segment)
		var method, path string
		switch route % 10 {
		case 0:
			method, path = "POST", "/v1/jobs/"+seg+"/runs"
		case 1:
			method, path = "GET", "/v1/jobs/"+seg+"/runs"
		case 2:
			method, path = "GET", "/v1/runs/"+seg
		case 3:
			method, path = "POST", "/v1/runs/"+seg+"/cancel"
		case 4:
			method, path = "POST", "/v1/jobs/"+seg+"/pause"
		case 5:
			method, path = "POST", "/v1/jobs"
		case 6:
			method, path = "PUT", "/v1/jobs/"+seg
		case 7:
			method, path = "DELETE", "/v1/jobs/"+seg
		case 8:
			method, path = "GET", "/v1/jobs"
		default:
			method, path = "GET", "/v1/audit"
		}
		target := path
		if query != "" {
			target += "?" + query
		}
		req, err := http.NewRequestWithContext(t.Context(), method, "http://scheduler"+target, bytes.NewReader(body))
		if err != nil {
			t.Skip("not a request target an HTTP server would receive")
		}
		for name, v := range map[string]string{"Idempotency-Key": key, "Authorization": auth, "Content-Type": contentType} {
			if v != "" && !strings.ContainsAny(v, "\r\n\x00") {
				req.Header.Set(name, v)
			}
		}
		if d, err := time.ParseDuration(req.URL.Query().Get("wait")); err == nil && d > 20*time.Millisecond {
			t.Skip("a long ?wait only holds the answer (nobody runs the run here); TestTriggerWait* cover it")
		}
		if auth == "" {
			req.Header.Set("Authorization", "Bearer "+testToken) // most inputs should reach the handlers
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)

		if rec.Code >= 500 {
			t.Fatalf("%s %s answered %d: %s", method, target, rec.Code, rec.Body)
		}
		if rec.Code >= 400 {
			if ct := rec.Header().Get("Content-Type"); ct != "application/problem+json" {
				t.Fatalf("%s %s answered %d with Content-Type %q", method, target, rec.Code, ct)
			}
			var p client.Problem
			if err := json.Unmarshal(rec.Body.Bytes(), &p); err != nil || p.Status != rec.Code || p.Type == "" || p.Detail == "" {
				t.Fatalf("%s %s answered %d with a bad problem (%v): %s", method, target, rec.Code, err, rec.Body)
			}
		}
		// Keep the job idle, so later inputs exercise the insert path too.
		if rec.Code == http.StatusAccepted {
			_, _ = db.Pool.Exec(t.Context(), `UPDATE job_runs SET status = 'succeeded', finished_at = now() WHERE status IN ('queued', 'running')`)
		}
	})
}
