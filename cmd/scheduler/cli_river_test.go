package main

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/schedulerhq/scheduler/client"
)

// `scheduler job NAME` says what a river job inserts, where, and whether it is unique.
func TestDefinitionLinesOfARiverJob(t *testing.T) {
	lines := definitionLines(&client.Job{Kind: "river", Target: "River send_invoices on APP (queue billing)",
		Definition: []byte(`{"name": "invoices", "schedule": "0 6 * * *", "river": {"target": "APP", "kind": "send_invoices",
			"queue": "billing", "args": {"region":"eu"}, "unique": true}}`)})
	assert.Contains(t, lines, [2]string{"SQL target", "APP"})
	assert.Contains(t, lines, [2]string{"River job", `kind send_invoices, queue billing, args {"region":"eu"}`})
	assert.Contains(t, lines, [2]string{"Unique", "no job while one of the same kind, args and queue waits or runs"})
}

// A river job in a jobs file: its args are a YAML mapping, read as the JSON object they are.
func TestJobFileWithARiverJob(t *testing.T) {
	defs, problems := parseJobs([]byte(`jobs:
  - name: invoices
    schedule: "0 6 * * *"
    river:
      target: APP
      kind: send_invoices
      queue: billing
      args: {region: eu, dry: false, ids: [1, 2]}
      unique: true
`), "default")
	assert.Empty(t, problems)
	if assert.Len(t, defs, 1) && assert.NotNil(t, defs[0].River) {
		r := defs[0].River
		assert.Equal(t, "send_invoices", r.Kind)
		assert.True(t, r.Unique)
		assert.JSONEq(t, `{"region": "eu", "dry": false, "ids": [1, 2]}`, string(r.Args))
	}

	_, problems = parseJobs([]byte("jobs:\n  - name: x\n    schedule: \"@every 1m\"\n    river: {target: APP, kidn: k}\n"), "default")
	assert.Contains(t, problems[0], `unknown key "river.kidn": did you mean "kind"?`)
}
