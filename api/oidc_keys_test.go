package api

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schedulerhq/scheduler/internal/idp"
	"github.com/schedulerhq/scheduler/internal/metrics"
	"github.com/schedulerhq/scheduler/internal/store"
	"github.com/schedulerhq/scheduler/internal/testdb"
)

const oidcJob = `{"name": "signed", "schedule": "0 2 * * *", "http": {"url": "https://billing.example/run", "auth": {"oidc": {"audience": "billing"}}}}`

// Without SCHEDULER_SECRET_KEY nothing is signed: a definition asking for a token is refused
// saying what the operator must do, and the documents say the feature is off.
func TestOIDCOffWithoutSecretKey(t *testing.T) {
	t.Parallel()
	a := newTestAPI(t)
	res := a.do("POST", "/v1/jobs", oidcJob, nil)
	require.Equal(t, http.StatusUnprocessableEntity, res.Status, "%s", res.Body)
	assert.Contains(t, string(res.Body), "SCHEDULER_SECRET_KEY")
	assert.Equal(t, "http.auth.oidc", res.problemField(t))

	res = a.do("GET", idp.DiscoveryPath, "", header{"Authorization": ""})
	assert.Equal(t, http.StatusNotFound, res.Status)
	assert.Equal(t, "oidc-off", res.problemType(t))
	res = a.do("GET", "/v1/oidc/keys", "", nil)
	assert.Equal(t, http.StatusConflict, res.Status)
}

// With a key: the documents are public and cacheable, an admin lists the keys (no private
// part), and a rotation asked before the next key's pre-publication is refused with when.
func TestOIDCDocumentsAndKeys(t *testing.T) {
	t.Parallel()
	db, _ := testdb.Open(t, store.Options{InstanceID: testInstance, LeaseTimeout: time.Minute})
	ts := httptest.NewUnstartedServer(nil)
	ts.Start()
	t.Cleanup(ts.Close)
	keys := idp.New(idp.Config{DB: db.DB, Box: testSecretBox(t), Issuer: ts.URL})
	s := NewServer(Config{DB: db.DB, InstanceID: testInstance, Jobs: testJobs(t), APIToken: testToken,
		Recorder: metrics.New(), TokenKeys: keys})
	ts.Config.Handler = s.Handler()
	router, err := loadOpenAPI()
	require.NoError(t, err)
	a := &testAPI{t: t, db: db, server: s, http: ts, router: router}

	res := a.do("POST", "/v1/jobs", oidcJob, nil)
	require.Equal(t, http.StatusCreated, res.Status, "%s", res.Body)

	res = a.do("GET", idp.DiscoveryPath, "", header{"Authorization": ""})
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	assert.Equal(t, ts.URL, res.JSON(t)["issuer"])
	assert.Equal(t, ts.URL+idp.JWKSPath, res.JSON(t)["jwks_uri"])
	assert.Equal(t, "public, max-age=300", res.Header.Get("Cache-Control"))
	res = a.do("GET", idp.JWKSPath, "", header{"Authorization": ""})
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	assert.Len(t, res.JSON(t)["keys"], 2, "current and next")
	assert.NotContains(t, string(res.Body), `"d"`)

	res = a.do("GET", "/v1/oidc/keys", "", header{"Authorization": ""})
	assert.Equal(t, http.StatusUnauthorized, res.Status)
	res = a.do("GET", "/v1/oidc/keys", "", nil)
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	assert.Len(t, res.JSON(t)["keys"], 2)

	res = a.do("POST", "/v1/oidc/keys/rotate", `{"reason": "drill"}`, nil)
	require.Equal(t, http.StatusConflict, res.Status, "%s", res.Body)
	assert.Equal(t, "rotation-too-soon", res.problemType(t))
	assert.NotEmpty(t, res.Header.Get("Retry-After"))
	assert.Zero(t, a.count(`SELECT count(*) FROM operator_actions WHERE action = 'oidc-rotate'`), "nothing rotated, nothing audited")
}
