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
