package engine

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schedulerhq/scheduler/internal/config"
	"github.com/schedulerhq/scheduler/internal/store"
	"github.com/schedulerhq/scheduler/internal/targets"
	"github.com/schedulerhq/scheduler/internal/testdb"
)

// A dry run of a river job inserts nothing and says what it would have inserted; a manual
// run inserts one River job, with no slot in its metadata, and records the job's id on the
// run.
func TestRiverJobDryAndManualRuns(t *testing.T) {
	db, url := newDB(t)
	ctx := context.Background()
	appURL := testdb.New(t)
	testdb.MigrateRiver(t, appURL)
	app := testdb.Pool(t, appURL)
	login, loginURL := testdb.Login(t, appURL, testdb.RiverGrants...)
	initMarkers(t, appURL, login)
	conn, err := store.ConnConfig(loginURL, store.Options{InstanceID: "a", LeaseTimeout: config.LeaseTimeoutDefault})
	require.NoError(t, err)
	rt := runtimeFor(t)
	rt.SQLTargets = targets.NewSQLTargets(targets.NewSQLTarget(targets.SQLTargetConfig{Name: "APP", Conn: conn,
		InstanceID: "a", SchedulerLogin: "postgres", MarkerRetention: 24 * time.Hour}))

	createDefinition(t, db, `{"name": "report", "schedule": "0 0 1 1 *",
		"river": {"target": "APP", "kind": "build_report", "queue": "reports", "args": {"report": "daily"}}}`)
	n := startNode(t, url, "a", nodeOptions{runtime: rt})
	awaitSignal(t, &n.en.testSignals.leading, "leading")

	run, _, err := db.QueueManualRun(ctx, "report", nil, []byte(`{"dry_run": true}`))
	require.NoError(t, err)
	awaitStatus(t, db, run.ID, store.StatusSucceeded)
	attempts, err := db.Attempts(ctx, run.ID)
	require.NoError(t, err)
	require.Len(t, attempts, 1)
	assert.Contains(t, *attempts[0].Body, "dry run: would insert a River job of kind build_report into queue reports")
	var jobs int
	require.NoError(t, app.QueryRow(ctx, `SELECT count(*) FROM river_job`).Scan(&jobs))
	assert.Zero(t, jobs, "a dry run inserts nothing")

	run, _, err = db.QueueManualRun(ctx, "report", nil, []byte(`{}`))
	require.NoError(t, err)
	awaitStatus(t, db, run.ID, store.StatusSucceeded)
	var id int64
	var meta map[string]any
	require.NoError(t, app.QueryRow(ctx, `SELECT id, metadata FROM river_job WHERE kind = 'build_report' AND queue = 'reports'
		AND args = '{"report": "daily"}'`).Scan(&id, &meta))
	assert.Equal(t, float64(run.ID), meta["scheduler_run_id"])
	assert.Equal(t, "report", meta["scheduler_job"])
	assert.NotEmpty(t, meta["scheduler_key"])
	assert.NotContains(t, meta, "scheduler_slot", "a manual run has no slot")
	attempts, err = db.Attempts(ctx, run.ID)
	require.NoError(t, err)
	require.Len(t, attempts, 1)
	assert.Equal(t, "inserted River job "+strconv.FormatInt(id, 10), *attempts[0].Body)
}
