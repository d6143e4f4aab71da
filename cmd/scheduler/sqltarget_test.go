package main

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schedulerhq/scheduler/internal/testdb"
)

// An operator prepares a target whose login may not create tables (the scheduler's own
// database), and is told when a login could reach the scheduler.
func TestSQLTargetInitAndCheck(t *testing.T) {
	u := testdb.New(t)
	login, loginURL := testdb.Login(t, u)
	environ := []string{"DATABASE_URL=" + u, "SCHEDULER_SQL_TARGET_APP=" + loginURL}

	code, _, stderr := runCLI(t, environ, "sql-target", "check", "app")
	assert.Equal(t, exitFailure, code)
	assert.Contains(t, stderr, "run `scheduler sql-target init APP --admin-url")

	code, stdout, stderr := runCLI(t, environ, "sql-target", "init", "APP", "--admin-url", u)
	require.Equal(t, exitOK, code, stderr)
	assert.Contains(t, stdout, "schema scheduler_markers_"+login+" is ready for login "+login+"'s markers\n")
	assert.Contains(t, stdout, "cannot reach the scheduler; SQL jobs may name it")

	_, wideURL := testdb.Login(t, u, `GRANT pg_write_all_data TO %s`)
	code, _, stderr = runCLI(t, []string{"DATABASE_URL=" + u, "SCHEDULER_SQL_TARGET_WIDE=" + wideURL}, "sql-target", "check", "WIDE")
	assert.Equal(t, exitFailure, code)
	assert.Contains(t, stderr, "is a member of pg_write_all_data")

	code, _, stderr = runCLI(t, environ, "sql-target", "init", "NOPE")
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, stderr, "SCHEDULER_SQL_TARGET_NOPE is not set")
}
