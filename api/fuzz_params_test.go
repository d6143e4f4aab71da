package api

import (
	"bytes"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/schedulerhq/scheduler/internal/runtimejob"
	"github.com/schedulerhq/scheduler/internal/store"
	"github.com/schedulerhq/scheduler/internal/testdb"
)

// FuzzTriggerParams posts arbitrary bytes in every member of a trigger's params (and its
// reason) to an HTTP job and a SQL job. Control bytes arrive as JSON escapes, so NUL and
// the like reach the checks rather than the JSON decoder. Whatever arrives, the answer is
// never a 5xx: a NUL PostgreSQL cannot store or a header no call can carry is a 422.
func FuzzTriggerParams(f *testing.F) {
	db, _ := testdb.Open(f, store.Options{InstanceID: testInstance})
	s := NewServer(Config{DB: db.DB, InstanceID: testInstance, Jobs: testJobs(f), APIToken: testToken,
		Runtime: runtimejob.Env{SQLTarget: testSQLTarget}})
	h := s.Handler()
	post := func(path, body string) *httptest.ResponseRecorder {
		req := httptest.NewRequest("POST", path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+testToken)
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec
	}
	for _, def := range []string{string(httpJob("hook")),
		`{"name": "refresh", "schedule": "0 2 * * *", "sql": {"target": "APP", "statements": "SELECT 1"}}`} {
		if rec := post("/v1/jobs", def); rec.Code != http.StatusCreated {
			f.Fatalf("create: %d %s", rec.Code, rec.Body)
		}
	}
	for _, seed := range [][5]string{
		{"", "\x00", "X-A", "v", ""},
		{"r", "{}", "X-A", "a\x01b", "day"},
		{"\x00", "body", "X\x07", "\x7f", "\x00"},
		{"", "\xff\xfe", "X-A", "caf\xc3\xa9\t", "day"},
		{"ok", "", "Idempotency-Key", "x", "day"},
	} {
		f.Add(uint8(0), seed[0], seed[1], seed[2], seed[3], seed[4], "v\x00")
		f.Add(uint8(1), seed[0], seed[1], seed[2], seed[3], seed[4], "v\x00")
	}
	f.Fuzz(func(t *testing.T, which uint8, reason, body, hName, hValue, varName, varValue string) {
		job, params := "hook", fmt.Sprintf(`"body": %s, "headers": {%s: %s}`, jsonBytes(body), jsonBytes(hName), jsonBytes(hValue))
		if which%2 == 1 {
			job, params = "refresh", fmt.Sprintf(`"vars": {%s: %s}`, jsonBytes(varName), jsonBytes(varValue))
		}
		rec := post("/v1/jobs/"+job+"/runs", fmt.Sprintf(`{"reason": %s, "params": {%s}}`, jsonBytes(reason), params))
		if rec.Code >= 500 {
			t.Fatalf("%s answered %d: %s", job, rec.Code, rec.Body)
		}
		if rec.Code == http.StatusAccepted || rec.Code == http.StatusOK {
			// Keep the jobs idle, so later inputs exercise the insert path too.
			_, _ = db.Pool.Exec(t.Context(), `UPDATE job_runs SET status = 'succeeded', finished_at = now() WHERE status IN ('queued', 'running')`)
		}
	})
}

// jsonBytes writes s as a JSON string whose control bytes are \u escapes and whose other
// bytes are left as they are, invalid UTF-8 included.
func jsonBytes(s string) string {
	var b bytes.Buffer
	b.WriteByte('"')
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c < 0x20 || c == '"' || c == '\\' || c == 0x7f:
			fmt.Fprintf(&b, `\u%04x`, c)
		default:
			b.WriteByte(c)
		}
	}
	b.WriteByte('"')
	return b.String()
}
