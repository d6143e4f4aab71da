package runtimejob_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schedulerhq/scheduler/internal/runtimejob"
)

// The overlap policies replace and allow; max_concurrent comes with allow only, within its
// bounds, and its mistakes are reported with the definition's others.
func TestCheckOverlapReplaceAndAllow(t *testing.T) {
	const base = `"schedule": "@every 1m", "http": {"url": "https://billing.internal/x"}`
	for _, ok := range []string{
		`{"name": "a", "overlap": "replace", ` + base + `}`,
		`{"name": "a", "overlap": "allow", "max_concurrent": 1, ` + base + `}`,
		`{"name": "a", "overlap": "allow", "max_concurrent": 50, ` + base + `}`,
	} {
		j, errs := runtimejob.Check(decode(t, ok), env())
		require.Empty(t, errs, ok)
		again, errs := runtimejob.Check(j.Def, env())
		require.Empty(t, errs)
		assert.Equal(t, j.Def, again.Def, "the normal form is stable")
	}
	j, _ := runtimejob.Check(decode(t, `{"name": "a", "overlap": "allow", "max_concurrent": 3, `+base+`}`), env())
	assert.Equal(t, 3, j.Def.MaxConcurrent)

	// A hostile author: an unbounded fan-out, a bound smuggled onto another policy, a
	// negative one; every mistake comes back at once, beside the others.
	for def, want := range map[string]string{
		`{"name": "a", "overlap": "allow", ` + base + `}`:                                             "required",
		`{"name": "a", "overlap": "allow", "max_concurrent": 51, ` + base + `}`:                       "out of range",
		`{"name": "a", "overlap": "allow", "max_concurrent": 1000000000, ` + base + `}`:               "out of range",
		`{"name": "a", "overlap": "allow", "max_concurrent": -1, ` + base + `}`:                       "out of range",
		`{"name": "a", "overlap": "skip", "max_concurrent": 3, ` + base + `}`:                         "only with overlap",
		`{"name": "a", "max_concurrent": 3, ` + base + `}`:                                            "only with overlap",
		`{"name": "a", "overlap": "replace", "max_concurrent": 2, ` + base + `}`:                      "only with overlap",
		`{"name": "a", "overlap": "queue-one", "max_concurrent": 2, "timeout": "soon", ` + base + `}`: "only with overlap",
	} {
		_, errs := runtimejob.Check(decode(t, def), env())
		got := fields(errs)
		assert.Contains(t, got["max_concurrent"], want, def)
	}
	_, errs := runtimejob.Check(decode(t, `{"name": "Bad", "overlap": "allow", "max_concurrent": 0, "timeout": "soon", `+base+`}`), env())
	got := fields(errs)
	for _, f := range []string{"name", "timeout", "max_concurrent"} {
		assert.Contains(t, got, f, "every wrong field at once")
	}
	_, errs = runtimejob.Check(decode(t, `{"name": "a", "overlap": "parallel", `+base+`}`), env())
	assert.Contains(t, fields(errs)["overlap"], `"allow"`, "the message lists the policies")
}
