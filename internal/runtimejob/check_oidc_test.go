package runtimejob_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schedulerhq/scheduler/internal/runtimejob"
)

func oidcJob(auth string) string {
	return `{"name": "nightly", "schedule": "0 2 * * *", "http": {"url": "https://billing.example/run", "auth": ` + auth + `}}`
}

func TestOIDCAuth(t *testing.T) {
	signing := env()
	signing.TokenSigning = func() error { return nil }

	c, errs := runtimejob.Check(decode(t, oidcJob(`{"oidc": {"audience": "billing"}}`)), signing)
	require.Nil(t, errs)
	assert.Equal(t, "billing", c.Def.HTTP.Auth.OIDC.Audience)
	assert.Empty(t, c.Def.CallSecrets(), "an OIDC token names no secret")

	for name, tc := range map[string]struct{ auth, field, want string }{
		"no audience":    {`{"oidc": {}}`, "http.auth.oidc.audience", "required"},
		"blank audience": {`{"oidc": {"audience": "  "}}`, "http.auth.oidc.audience", "printable"},
		"long audience":  {`{"oidc": {"audience": "` + strings.Repeat("a", 300) + `"}}`, "http.auth.oidc.audience", "at most 256"},
		"control":        {`{"oidc": {"audience": "bill\u0007ing"}}`, "http.auth.oidc.audience", "printable"},
		"with bearer":    {`{"oidc": {"audience": "billing"}, "bearer_secret": "BILLING_TOKEN"}`, "http.auth", "one of"},
		"with header":    {`{"oidc": {"audience": "billing"}, "header": "X-Key", "header_secret": "BILLING_TOKEN"}`, "http.auth", "one of"},
	} {
		t.Run(name, func(t *testing.T) {
			_, errs := runtimejob.Check(decode(t, oidcJob(tc.auth)), signing)
			require.NotNil(t, errs)
			assert.Contains(t, fields(errs)[tc.field], tc.want, errs.Error())
		})
	}

	// An Authorization header of the definition's own would be replaced by the token.
	d := decode(t, `{"name": "nightly", "schedule": "0 2 * * *", "http": {"url": "https://billing.example/run",
		"headers": {"Authorization": "Bearer x"}, "auth": {"oidc": {"audience": "billing"}}}}`)
	_, errs = runtimejob.Check(d, signing)
	assert.Contains(t, fields(errs)["http.headers.Authorization"], "http.auth")

	// A replica without SCHEDULER_SECRET_KEY signs nothing: the definition is refused with
	// what the operator must do.
	off := env()
	off.TokenSigning = func() error { return errors.New("set SCHEDULER_SECRET_KEY") }
	_, errs = runtimejob.Check(decode(t, oidcJob(`{"oidc": {"audience": "billing"}}`)), off)
	require.NotNil(t, errs)
	assert.Contains(t, fields(errs)["http.auth.oidc"], "SCHEDULER_SECRET_KEY")
}
