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

	// A column of the leader row, in a schema other than public, is found too.
	admin := testdb.Pool(t, u)
	for _, s := range []string{`CREATE SCHEMA sched`, `ALTER TABLE scheduler_leader SET SCHEMA sched`} {
		_, err := admin.Exec(t.Context(), s)
		require.NoError(t, err, s)
	}
	_, columnURL := testdb.Login(t, u, `GRANT USAGE ON SCHEMA sched TO %s`, `GRANT UPDATE (epoch) ON sched.scheduler_leader TO %s`)
	code, _, stderr = runCLI(t, []string{"DATABASE_URL=" + u, "SCHEDULER_SQL_TARGET_COLUMN=" + columnURL}, "sql-target", "check", "COLUMN")
	assert.Equal(t, exitFailure, code)
	assert.Contains(t, stderr, "holds privileges on the scheduler's tables: sched.scheduler_leader (column privileges)")

	code, _, stderr = runCLI(t, environ, "sql-target", "init", "NOPE")
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, stderr, "SCHEDULER_SQL_TARGET_NOPE is not set")
}
