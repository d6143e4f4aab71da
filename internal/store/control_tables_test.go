package store_test

import (
	"context"
	"regexp"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schedulerhq/scheduler/internal/store"
	"github.com/schedulerhq/scheduler/internal/testdb"
)

// applicationTables are the tables of the compiled business jobs' application, which SQL
// targets' logins may be granted: every other table the migrations create is the
// scheduler's and must match store.ControlTables, or a target's login could be granted it
// unnoticed.
var applicationTables = map[string]bool{
	"appointments": true, "daily_rounds": true, "forms": true, "group_prompts": true,
	"group_settings": true, "groups": true, "leads": true, "member_plan_change_history": true,
	"members": true, "membership_plans": true, "message_deliveries": true,
	"organizations": true, "tenants": true,
}

func TestControlTablesNameEveryTable(t *testing.T) {
	db, _ := testdb.Open(t, store.Options{})
	// A sequence that belongs to a table (serial, identity) goes by the table's name.
	rows, err := db.Pool.Query(context.Background(), `
		SELECT coalesce(owner.relname, c.relname)
		FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
		LEFT JOIN pg_depend d ON c.relkind = 'S' AND d.classid = 'pg_class'::regclass AND d.objid = c.oid
		                      AND d.refclassid = 'pg_class'::regclass AND d.deptype IN ('a', 'i')
		LEFT JOIN pg_class owner ON owner.oid = d.refobjid
		WHERE n.nspname = 'public' AND c.relkind IN ('r', 'p', 'v', 'm', 'S', 'f')`)
	require.NoError(t, err)
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	control := regexp.MustCompile(store.ControlTables)
	seen := map[string]bool{}
	for _, name := range names {
		if applicationTables[name] {
			seen[name] = true
			assert.False(t, control.MatchString(name), "%s is the application's, yet ControlTables matches it", name)
			continue
		}
		assert.True(t, control.MatchString(name), "%s is neither an application table nor matched by ControlTables", name)
	}
	assert.Len(t, seen, len(applicationTables), "every application table exists")
	assert.Contains(t, names, "job_runs_id_seq")
}
