package runtimejob_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schedulerhq/scheduler/internal/runtimejob"
)

// The attack: a river job that names a target its namespace was not given, a kind or queue
// River would refuse at every slot, args that are not an object or too large to copy into
// every job. All of it is refused at once, each on its field.
func TestCheckRiverRefusesEveryWrongFieldAtOnce(t *testing.T) {
	d := decode(t, `{"name": "invoices", "schedule": "@every 1m", "retry": {"max_attempts": 2},
		"river": {"target": "OTHER", "kind": "send invoice; DROP", "queue": "Billing Jobs", "args": [1, 2]}}`)
	_, errs := runtimejob.Check(d, env())
	got := fields(errs)
	assert.Contains(t, got["river.target"], `"OTHER" is not a declared SQL target`)
	assert.Contains(t, got["river.kind"], "is not a River job kind")
	assert.Contains(t, got["river.queue"], "is not a River queue")
	assert.Contains(t, got["river.args"], "must be a JSON object")
	assert.Contains(t, got["retry"], "River retries the job itself")
	assert.Len(t, errs, 5, "%v", errs)

	big := `{"k": "` + strings.Repeat("a", runtimejob.MaxRiverArgs) + `"}`
	_, errs = runtimejob.Check(decode(t, `{"name": "invoices", "schedule": "@every 1m",
		"river": {"target": "APP", "kind": "", "args": `+big+`}}`), env())
	got = fields(errs)
	assert.Contains(t, got["river.kind"], "required")
	assert.Contains(t, got["river.args"], "at most 65536")

	_, errs = runtimejob.Check(decode(t, `{"name": "two", "schedule": "@every 1m",
		"sql": {"target": "APP", "statements": "SELECT 1"}, "river": {"target": "APP", "kind": "k1"}}`), env())
	assert.Contains(t, fields(errs)["http"], `exactly one target: "http", "sql", "nats" or "river"`)
}

// A river job's normal form: queue and args filled in, args compacted; Kind says river.
func TestCheckRiverNormalForm(t *testing.T) {
	d := decode(t, `{"name": "invoices", "schedule": "@every 1m",
		"river": {"target": "APP", "kind": "send_invoice", "args": { "customer_id" : 42 }, "unique": true}}`)
	j, errs := runtimejob.Check(d, env())
	require.Empty(t, errs)
	assert.Equal(t, runtimejob.KindRiver, j.Def.Kind())
	assert.Equal(t, "APP", j.Def.TargetName())
	assert.Equal(t, &runtimejob.RiverTarget{Target: "APP", Kind: "send_invoice", Args: []byte(`{"customer_id":42}`),
		Queue: "default", Unique: true}, j.Def.River)
	assert.Equal(t, `{ "customer_id" : 42 }`, string(d.River.Args), "the caller's definition is left as it was")

	j, errs = runtimejob.Check(decode(t, `{"name": "invoices", "schedule": "@every 1m",
		"river": {"target": "APP", "kind": "billing.SendInvoice[v2]", "queue": "billing_jobs-2"}}`), env())
	require.Empty(t, errs)
	assert.Equal(t, `{}`, string(j.Def.River.Args))
}
