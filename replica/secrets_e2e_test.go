package replica_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schedulerhq/scheduler/internal/config"
	"github.com/schedulerhq/scheduler/internal/secrets/seal"
	"github.com/schedulerhq/scheduler/internal/testdb"
	"github.com/schedulerhq/scheduler/replica/replicatest"
)

const e2eToken = "e2e-admin-token"

type lockedLog struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *lockedLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *lockedLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// e2eCall sends one API request as the admin and returns the status and body.
func e2eCall(t *testing.T, base, method, path, body string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, base+path, strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+e2eToken)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	res, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	var headers []string
	for k, v := range res.Header {
		headers = append(headers, k+": "+strings.Join(v, ","))
	}
	return res.StatusCode, append(b, []byte(strings.Join(headers, "\n"))...)
}

// A stored secret's value, from the PUT that stores it to the calls that send it, appears
// in no API answer, no log line, no run, no attempt, no audit row, and nowhere in the
// database in clear: every column of every table is searched. A replaced value is the one
// the next call sends.
func TestStoredSecretValueAppearsNowhereButInTheCall(t *testing.T) {
	values := []string{"e2e-first-secret-value-7f3a", "e2e-second-secret-value-9c1d"}
	const operatorValue = "e2e-operator-secret-value-42aa"
	raw := make([]byte, seal.KeySize)
	_, err := rand.Read(raw)
	require.NoError(t, err)
	key, err := seal.ParseKey(base64.StdEncoding.EncodeToString(raw))
	require.NoError(t, err)

	// The target echoes the Authorization it got, and fails the first attempt of each run,
	// so the echo is also in a failed attempt's recorded body and the run's error.
	var mu sync.Mutex
	var received []string
	var calls atomic.Int32
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		auth := r.Header.Get("Authorization")
		mu.Lock()
		received = append(received, auth)
		mu.Unlock()
		if calls.Add(1)%2 == 1 {
			w.WriteHeader(http.StatusBadGateway)
		}
		fmt.Fprintf(w, "you sent %s", auth)
	}))
	t.Cleanup(target.Close)

	logs := &lockedLog{}
	srv := replicatest.Start(t, replicatest.Options{Token: e2eToken,
		Log: slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		Runtime: config.Runtime{HTTPAllow: []string{"127.0.0.1/32"}, SecretBox: seal.New(key),
			Secrets: map[string]string{"OPS_TOKEN": operatorValue}}})
	var answers [][]byte
	do := func(method, path, body string, want int) []byte {
		t.Helper()
		status, b := e2eCall(t, srv.URL, method, path, body)
		require.Equal(t, want, status, "%s %s: %s", method, path, b)
		answers = append(answers, b)
		return b
	}

	do("PUT", "/v1/namespaces/billing", `{"http_allow": ["127.0.0.1"]}`, http.StatusCreated)
	do("PUT", "/v1/namespaces/billing/secrets/TOKEN", `{"value": "`+values[0]+`", "allowed_hosts": ["127.0.0.1"]}`, http.StatusCreated)
	do("POST", "/v1/namespaces/billing/jobs", `{"name": "echo", "schedule": "0 0 1 1 *",
		"retry": {"max_attempts": 2, "initial_backoff": "100ms"},
		"http": {"url": "`+target.URL+`/echo", "auth": {"bearer_secret": "TOKEN"}, "signing_secret": "TOKEN"}}`, http.StatusCreated)
	// The trigger may reach the leader before its watch has followed the create; the
	// queue then loads the definition itself (engine test TestRunQueuedBeforeTheDefinition…).
	var runIDs []string
	for i := range values {
		if i > 0 {
			do("PUT", "/v1/namespaces/billing/secrets/TOKEN", `{"value": "`+values[i]+`", "allowed_hosts": ["127.0.0.1"]}`, http.StatusOK)
		}
		b := do("POST", "/v1/namespaces/billing/jobs/echo/runs?wait=30s", "", http.StatusOK)
		var run struct {
			ID     int64  `json:"id"`
			Status string `json:"status"`
		}
		require.NoError(t, json.NewDecoder(bytes.NewReader(b)).Decode(&run))
		require.Equal(t, "succeeded", run.Status, "%s", b)
		runIDs = append(runIDs, fmt.Sprint(run.ID))
	}
	mu.Lock()
	assert.Equal(t, []string{"Bearer " + values[0], "Bearer " + values[0], "Bearer " + values[1], "Bearer " + values[1]}, received,
		"each run sends the value stored when it runs: the replaced one without a restart")
	mu.Unlock()

	for _, path := range []string{"/v1/namespaces/billing/secrets", "/v1/namespaces/billing/secrets/TOKEN",
		"/v1/namespaces/billing/jobs/echo", "/v1/namespaces/billing/jobs/echo/runs", "/v1/runs/" + runIDs[0], "/v1/runs/" + runIDs[1],
		"/v1/audit", "/v1/namespaces/billing", "/v1/namespaces/billing/jobs"} {
		do("GET", path, "", http.StatusOK)
	}
	run := string(do("GET", "/v1/runs/"+runIDs[0], "", http.StatusOK))
	assert.Contains(t, run, "you sent Bearer [secret]", "the failed attempt's echo is recorded without the value")
	do("DELETE", "/v1/namespaces/billing/secrets/TOKEN", "", http.StatusNoContent)
	do("GET", "/v1/audit", "", http.StatusOK)

	secretsOfTest := append([]string{operatorValue}, values...)
	for _, v := range secretsOfTest {
		for _, b := range answers {
			assert.NotContains(t, string(b), v)
		}
		assert.NotContains(t, logs.String(), v)
		for _, where := range columnsHolding(t, srv.DB, v) {
			t.Errorf("the value %q is in the database in clear: %s", v, where)
		}
	}
	assert.Contains(t, logs.String(), `"msg":"secret stored"`, "the log was captured")
	assert.NotEmpty(t, columnsHolding(t, srv.DB, "you sent Bearer [secret]"), "the search finds what the database holds")
}

// columnsHolding searches every column of every table of the database for s: the row as
// text (text, json, jsonb, arrays, numbers) and each bytea column's raw bytes.
func columnsHolding(t *testing.T, db *testdb.DB, s string) []string {
	t.Helper()
	ctx := context.Background()
	rows, err := db.Pool.Query(ctx, `
		SELECT c.table_schema, c.table_name, c.column_name, c.data_type
		FROM information_schema.columns c
		JOIN information_schema.tables t ON t.table_schema = c.table_schema AND t.table_name = c.table_name
		WHERE t.table_type = 'BASE TABLE' AND c.table_schema NOT IN ('pg_catalog', 'information_schema')`)
	require.NoError(t, err)
	type column struct{ schema, table, name, typ string }
	cols, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (column, error) {
		var c column
		return c, r.Scan(&c.schema, &c.table, &c.name, &c.typ)
	})
	require.NoError(t, err)
	require.Greater(t, len(cols), 50, "every table's columns were listed")
	var found []string
	for _, c := range cols {
		q := fmt.Sprintf(`SELECT count(*) FROM %s.%s WHERE position($1 IN %s::text) > 0`,
			pgx.Identifier{c.schema}.Sanitize(), pgx.Identifier{c.table}.Sanitize(), pgx.Identifier{c.name}.Sanitize())
		arg := any(s)
		if c.typ == "bytea" {
			q = fmt.Sprintf(`SELECT count(*) FROM %s.%s WHERE position($1::bytea IN %s) > 0`,
				pgx.Identifier{c.schema}.Sanitize(), pgx.Identifier{c.table}.Sanitize(), pgx.Identifier{c.name}.Sanitize())
			arg = []byte(s)
		}
		var n int
		require.NoError(t, db.Pool.QueryRow(ctx, q, arg).Scan(&n), "%s", q)
		if n > 0 {
			found = append(found, fmt.Sprintf("%s.%s.%s (%d rows)", c.schema, c.table, c.name, n))
		}
	}
	return found
}
