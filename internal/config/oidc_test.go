package config_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schedulerhq/scheduler/internal/config"
)

func TestOIDCOffByDefault(t *testing.T) {
	c, err := load(t)
	require.NoError(t, err)
	assert.Equal(t, config.OIDC{}, c.OIDC)
}

func TestOIDCGoodValues(t *testing.T) {
	c, err := load(t,
		"SCHEDULER_OIDC_ISSUER=https://kubernetes.default.svc",
		"SCHEDULER_OIDC_AUDIENCE=scheduler",
		"SCHEDULER_OIDC_JWKS_URL=https://kubernetes.default.svc/openid/v1/jwks",
		"SCHEDULER_OIDC_BINDINGS= system:serviceaccount:billing:*=billing:editor, system:serviceaccount:ops:admin=*:admin,,"+
			"*@example.com=*:viewer,system:serviceaccount:a-1:x=a-1:viewer",
	)
	require.NoError(t, err)
	assert.Equal(t, config.OIDC{
		Issuer:   "https://kubernetes.default.svc",
		Audience: "scheduler",
		JWKSURL:  "https://kubernetes.default.svc/openid/v1/jwks",
		Bindings: []config.OIDCBinding{
			{Subject: "system:serviceaccount:billing:*", Namespace: "billing", Role: "editor"},
			{Subject: "system:serviceaccount:ops:admin", Namespace: "*", Role: "admin"},
			{Subject: "*@example.com", Namespace: "*", Role: "viewer"},
			{Subject: "system:serviceaccount:a-1:x", Namespace: "a-1", Role: "viewer"},
		},
	}, c.OIDC, "bindings in the order given, empty entries skipped, spaces around entries trimmed")

	c, err = load(t, "SCHEDULER_OIDC_ISSUER=http://127.0.0.1:5556/dex", "SCHEDULER_OIDC_AUDIENCE=scheduler")
	require.NoError(t, err, "http for a local issuer; bindings may be left for later")
	assert.Equal(t, "http://127.0.0.1:5556/dex", c.OIDC.Issuer)
	assert.Empty(t, c.OIDC.JWKSURL)
	assert.Empty(t, c.OIDC.Bindings)
}

func TestOIDCBadValues(t *testing.T) {
	issuer := []string{"SCHEDULER_OIDC_ISSUER=https://issuer.example", "SCHEDULER_OIDC_AUDIENCE=scheduler"}
	withIssuer := func(kv ...string) []string { return append(kv, issuer...) }
	tests := []struct {
		name string
		env  []string
		want [][]string // per expected error, in order: parts of its message
	}{
		{"issuer without audience", []string{"SCHEDULER_OIDC_ISSUER=https://issuer.example"},
			[][]string{{"SCHEDULER_OIDC_AUDIENCE is not set: want the audience the scheduler's tokens are issued for, such as scheduler, because SCHEDULER_OIDC_ISSUER is set"}}},
		{"audience without issuer", []string{"SCHEDULER_OIDC_AUDIENCE=scheduler"},
			[][]string{{"SCHEDULER_OIDC_ISSUER is not set: want an issuer URL such as https://kubernetes.default.svc, because SCHEDULER_OIDC_AUDIENCE is set (only used with an issuer)"}}},
		{"JWKS URL and bindings without issuer", []string{"SCHEDULER_OIDC_JWKS_URL=https://issuer.example/keys", "SCHEDULER_OIDC_BINDINGS=a=b:viewer"},
			[][]string{{"SCHEDULER_OIDC_ISSUER is not set: want an issuer URL such as https://kubernetes.default.svc, because SCHEDULER_OIDC_JWKS_URL and SCHEDULER_OIDC_BINDINGS are set"}}},
		{"issuer not a URL", []string{"SCHEDULER_OIDC_ISSUER=kubernetes.default.svc", "SCHEDULER_OIDC_AUDIENCE=scheduler"},
			[][]string{{`SCHEDULER_OIDC_ISSUER="kubernetes.default.svc" is not valid: want the issuer's URL, exactly as its tokens' iss claim has it, such as https://kubernetes.default.svc (the scheme must be https:// or http://)`}}},
		{"issuer with a query", []string{"SCHEDULER_OIDC_ISSUER=https://issuer.example/?tenant=1", "SCHEDULER_OIDC_AUDIENCE=scheduler"},
			[][]string{{`SCHEDULER_OIDC_ISSUER="https://issuer.example/?tenant=1" is not valid`, "(no query or fragment may be given in it)"}}},
		{"JWKS URL without host", withIssuer("SCHEDULER_OIDC_JWKS_URL=https:///keys"),
			[][]string{{`SCHEDULER_OIDC_JWKS_URL="https:///keys" is not valid: want the URL of the issuer's key set`, "(no host)"}}},
		{"binding without =", withIssuer("SCHEDULER_OIDC_BINDINGS=system:serviceaccount:ops:admin"),
			[][]string{{`SCHEDULER_OIDC_BINDINGS="system:serviceaccount:ops:admin" is not valid: want comma-separated subject-glob=namespace:role such as system:serviceaccount:billing:*=billing:editor`,
				"(no '=' between the subject and the grant)"}}},
		{"binding without role", withIssuer("SCHEDULER_OIDC_BINDINGS=ci=billing"),
			[][]string{{`SCHEDULER_OIDC_BINDINGS="ci=billing"`, "(no ':' between the namespace and the role)"}}},
		{"binding without subject", withIssuer("SCHEDULER_OIDC_BINDINGS==billing:viewer"),
			[][]string{{`SCHEDULER_OIDC_BINDINGS="=billing:viewer"`, "(no subject before '=')"}}},
		{"unknown role", withIssuer("SCHEDULER_OIDC_BINDINGS=ci=billing:owner"),
			[][]string{{`SCHEDULER_OIDC_BINDINGS="ci=billing:owner"`, `(role "owner" is not one of viewer, editor, admin)`}}},
		{"role and namespace swapped", withIssuer("SCHEDULER_OIDC_BINDINGS=ci=editor:billing"),
			[][]string{{`SCHEDULER_OIDC_BINDINGS="ci=editor:billing"`, `(role "billing" is not one of viewer, editor, admin)`}}},
		{"namespace not a DNS label", withIssuer("SCHEDULER_OIDC_BINDINGS=ci=Billing_1:viewer"),
			[][]string{{`SCHEDULER_OIDC_BINDINGS="ci=Billing_1:viewer"`, `(namespace "Billing_1" is neither * nor a DNS label`}}},
		{"namespace too long", withIssuer("SCHEDULER_OIDC_BINDINGS=ci=" + strings.Repeat("a", 64) + ":viewer"),
			[][]string{{`SCHEDULER_OIDC_BINDINGS="ci=aaaa`, "is neither * nor a DNS label"}}},
		{"admin on one namespace", withIssuer("SCHEDULER_OIDC_BINDINGS=ci=billing:admin"),
			[][]string{{`SCHEDULER_OIDC_BINDINGS="ci=billing:admin"`, "(admin is granted on every namespace or none: write *:admin)"}}},
		{"subject with a space", withIssuer("SCHEDULER_OIDC_BINDINGS=c i=billing:viewer"),
			[][]string{{`SCHEDULER_OIDC_BINDINGS="c i=billing:viewer"`, "the subject holds a space"}}},
		{"several bad entries, each named", withIssuer("SCHEDULER_OIDC_BINDINGS=a=b:admin,ok=*:viewer,c=d"),
			[][]string{{`SCHEDULER_OIDC_BINDINGS="a=b:admin"`, "write *:admin"}, {`SCHEDULER_OIDC_BINDINGS="c=d"`, "no ':'"}}},
		{"every problem at once", []string{"SCHEDULER_OIDC_ISSUER=ftp://issuer", "SCHEDULER_OIDC_JWKS_URL=keys", "SCHEDULER_OIDC_BINDINGS=x"},
			[][]string{{`SCHEDULER_OIDC_ISSUER="ftp://issuer"`}, {"SCHEDULER_OIDC_AUDIENCE is not set"}, {`SCHEDULER_OIDC_JWKS_URL="keys"`}, {`SCHEDULER_OIDC_BINDINGS="x"`}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := load(t, tt.env...)
			require.Error(t, err)
			got := lines(err)
			require.Len(t, got, len(tt.want), err.Error())
			for i, parts := range tt.want {
				for _, part := range parts {
					assert.Contains(t, got[i], part)
				}
			}
		})
	}
}
