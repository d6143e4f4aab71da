package runtimejob_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schedulerhq/scheduler/internal/runtimejob"
)

func env() runtimejob.Env {
	return runtimejob.Env{
		IsBuiltin: func(n string) bool { return n == "plan-change" },
		// An operator's secret of namespace default, and billing's, bound to its host.
		Secret: func(ns, n string) ([]string, bool) {
			switch {
			case ns == "default" && n == "BILLING_TOKEN":
				return nil, true
			case ns == "billing" && n == "INVOICES_TOKEN":
				return []string{"api.billing.example", "hooks.billing.example:8443"}, true
			}
			return nil, false
		},
		CheckURL: func(u string) error {
			if strings.Contains(u, "10.0.0.1") {
				return errors.New("private address")
			}
			return nil
		},
		SQLTarget: func(n string) error {
			if strings.EqualFold(n, "APP") {
				return nil
			}
			return fmt.Errorf("%q is not a declared SQL target; declared: APP", n)
		},
		Now: time.Date(2026, 11, 25, 0, 0, 0, 0, time.UTC),
	}
}

func decode(t *testing.T, s string) runtimejob.Definition {
	t.Helper()
	d, err := runtimejob.Decode([]byte(s))
	require.NoError(t, err)
	return d
}

func fields(errs runtimejob.Errors) map[string]string {
	m := map[string]string{}
	for _, e := range errs {
		m[e.Field] = e.Message
	}
	return m
}

// A definition with many mistakes gets every one of them back at once, each on its field.
func TestCheckReportsEveryWrongFieldAtOnce(t *testing.T) {
	d := decode(t, `{"name": "Bad Name", "schedule": "61 * * * *", "time_zone": "Mars/Olympus",
		"timeout": "soon", "overlap": "pile-up", "labels": {"Team!": "x"},
		"retry": {"max_attempts": 50},
		"http": {"method": "TRACE", "url": "http://10.0.0.1/x", "body": "",
		         "headers": {"Idempotency-Key": "forged", "X-Long": "`+strings.Repeat("a", 5000)+`"},
		         "auth": {"bearer_secret": "MISSING"}, "signing_secret": "lower"}}`)
	_, errs := runtimejob.Check(d, env())
	got := fields(errs)
	for _, f := range []string{"name", "time_zone", "timeout", "overlap", "labels.Team!", "retry.max_attempts",
		"http.method", "http.url", "http.headers.Idempotency-Key", "http.headers.X-Long",
		"http.auth.bearer_secret", "http.signing_secret"} {
		assert.Contains(t, got, f)
	}
	assert.Contains(t, got["http.auth.bearer_secret"], "SCHEDULER_SECRET_MISSING", "the message says what to set")
	assert.Contains(t, got["http.auth.bearer_secret"], "PUT /v1/namespaces/default/secrets/MISSING")
}

func TestCheckFillsDefaultsAndIsStable(t *testing.T) {
	d := decode(t, `{"name": "daily-report", "schedule": "0 2 * * *", "time_zone": "Europe/Paris",
		"http": {"url": "https://billing.internal/reports/daily", "auth": {"bearer_secret": "BILLING_TOKEN"}}}`)
	j, errs := runtimejob.Check(d, env())
	require.Empty(t, errs)
	assert.Equal(t, "POST", j.Def.HTTP.Method)
	assert.Equal(t, "1m", j.Def.Timeout)
	assert.Equal(t, "30s", j.Def.HTTP.Timeout)
	assert.Equal(t, runtimejob.OverlapSkip, j.Def.Overlap)
	assert.Equal(t, 3, j.Def.Retry.MaxAttempts)
	assert.Equal(t, 24*time.Hour, j.Catchup, "one period by default")
	assert.Equal(t, "Europe/Paris", j.Schedule.Location().String())

	again, errs := runtimejob.Check(j.Def, env())
	require.Empty(t, errs)
	assert.Equal(t, j.Def, again.Def, "checking the normal form changes nothing")
}

func TestCheckRefusesBuiltinNamesBothTargetsAndUnknownSQLTargets(t *testing.T) {
	_, errs := runtimejob.Check(decode(t, `{"name": "plan-change", "schedule": "@every 1m", "sql": {"target": "REPORTS", "statements": "SELECT 1"}}`), env())
	got := fields(errs)
	assert.Contains(t, got["name"], "built-in")
	assert.Contains(t, got["sql.target"], `"REPORTS" is not a declared SQL target; declared: APP`)

	_, errs = runtimejob.Check(decode(t, `{"name": "x", "schedule": "@every 1m", "sql": {"statements": "SELECT 1"}}`), env())
	assert.Contains(t, fields(errs)["sql.target"], "SCHEDULER_SQL_TARGET_<NAME>")

	_, errs = runtimejob.Check(decode(t, `{"name": "x", "schedule": "@every 1m", "sql": {"target": "app", "statements": "SELECT 1"}}`), env())
	assert.Empty(t, errs, "target names match case-insensitively")

	_, errs = runtimejob.Check(decode(t, `{"name": "x", "schedule": "@every 1m", "sql": {"target": "APP", "statements": "SELECT 1"}, "http": {"url": "https://a.example"}}`), env())
	assert.Contains(t, fields(errs), "http")
}

func TestCheckOneTimeSchedule(t *testing.T) {
	_, errs := runtimejob.Check(decode(t, `{"name": "once", "schedule": "@at 2020-01-01T00:00:00Z", "sql": {"target": "APP", "statements": "SELECT 1"}}`), env())
	assert.Contains(t, fields(errs)["schedule"], "has passed")
	j, errs := runtimejob.Check(decode(t, `{"name": "once", "schedule": "@at 2027-01-01T00:00:00Z", "sql": {"target": "APP", "statements": "SELECT 1"}}`), env())
	require.Empty(t, errs)
	assert.Equal(t, time.Hour, j.Catchup)
}

func TestJitterOffsetIsStableAndBelowJitter(t *testing.T) {
	j, errs := runtimejob.Check(decode(t, `{"name": "spread", "schedule": "0 * * * *", "jitter": "30s", "sql": {"target": "APP", "statements": "SELECT 1"}}`), env())
	require.Empty(t, errs)
	o := j.Offset()
	assert.Less(t, o, 30*time.Second)
	assert.Equal(t, o, j.Offset())
	_, errs = runtimejob.Check(decode(t, `{"name": "spread", "schedule": "@every 10s", "jitter": "10s", "sql": {"target": "APP", "statements": "SELECT 1"}}`), env())
	assert.Contains(t, fields(errs), "jitter")
}

func TestDecodeRefusesUnknownFields(t *testing.T) {
	_, err := runtimejob.Decode([]byte(`{"name": "x", "timezone": "UTC"}`))
	assert.ErrorContains(t, err, "timezone")
}

// PostgreSQL's jsonb cannot hold a NUL character, and a URL with a control character is no
// URL: the check refuses both, so no definition gets as far as a failed INSERT.
func TestCheckRefusesNULAndControlCharacters(t *testing.T) {
	d := decode(t, `{"name": "x", "schedule": "@every 1m", "description": "a\u0000b",
		"http": {"url": "https://a.example/\u0000", "body": "\u0000"}}`)
	got := fields(func() runtimejob.Errors { _, e := runtimejob.Check(d, env()); return e }())
	for _, f := range []string{"description", "http.url", "http.body"} {
		assert.Contains(t, got, f)
	}
}

// Load is the one reading of a stored definition: decoded, then checked without the
// replica's environment; a definition that decodes but fails the check still comes back
// decoded, for the API to show beside the reason.
func TestLoad(t *testing.T) {
	checked, decoded, err := runtimejob.Load([]byte(`{"name": "hook", "schedule": "@every 1m", "http": {"url": "https://example.com/"}}`))
	require.NoError(t, err)
	require.NotNil(t, decoded)
	assert.Equal(t, "hook", checked.Def.Name)
	assert.Equal(t, runtimejob.OverlapSkip, checked.Def.Overlap, "the checked definition has its defaults filled in")
	assert.Empty(t, decoded.Overlap, "the decoded one is as stored")

	checked, decoded, err = runtimejob.Load([]byte(`{"name": "hook", "schedule": "every minute", "http": {"url": "https://example.com/"}}`))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "schedule")
	assert.Nil(t, checked)
	require.NotNil(t, decoded)
	assert.Equal(t, "hook", decoded.Name)

	checked, decoded, err = runtimejob.Load([]byte(`{"name": "hook", "shedule": "@every 1m"}`))
	require.Error(t, err)
	assert.Nil(t, checked)
	assert.Nil(t, decoded)
}

// A header value with a control character would make every call of the job fail (Go's
// client refuses it): the definition is refused instead, naming the character.
func TestCheckRefusesControlCharactersInHeaders(t *testing.T) {
	d := decode(t, `{"name": "hook", "schedule": "0 2 * * *", "http": {"url": "https://billing.example/x",
		"headers": {"X-A": "a\u0001b", "X-B": "\u007f", "X-C": "tab\tand café are fine", "X-D\u0007": "v"},
		"auth": {"header": "X-Key\u0000", "header_secret": "BILLING_TOKEN"}}}`)
	_, errs := runtimejob.Check(d, env())
	got := fields(errs)
	assert.ElementsMatch(t, []string{"http.headers.X-A", "http.headers.X-B", "http.headers.X-D\a", "http.auth.header"}, keys(got), "%v", errs)
	assert.Contains(t, got["http.headers.X-A"], "U+0001")
}

func keys(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}
