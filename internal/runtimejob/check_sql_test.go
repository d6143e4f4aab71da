package runtimejob_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/schedulerhq/scheduler/internal/runtimejob"
)

// The attack: COMMIT; …; BEGIN between a job's statements would commit part of them without
// the slot's marker. A definition holding a statement that ends or controls the transaction,
// wherever it stands, is refused with each such statement named.
func TestCheckRefusesStatementsThatEndTheTransaction(t *testing.T) {
	d := decode(t, `{"name": "split", "schedule": "@every 1m", "sql": {"target": "APP",
		"statements": "INSERT INTO effects VALUES (1); COMMIT; SELECT 'COMMIT'; /* ; END */ begin"}}`)
	_, errs := runtimejob.Check(d, env())
	got := fields(errs)["sql.statements"]
	assert.Contains(t, got, "statement 2: COMMIT, statement 4: BEGIN")
	assert.Contains(t, got, "remove BEGIN")

	_, errs = runtimejob.Check(decode(t, `{"name": "ok", "schedule": "@every 1m", "sql": {"target": "APP",
		"statements": "DO $$ BEGIN PERFORM 1; END $$; SELECT 'COMMIT'"}}`), env())
	assert.Empty(t, errs)
}
