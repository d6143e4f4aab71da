package engine

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schedulerhq/scheduler/internal/config"
	"github.com/schedulerhq/scheduler/internal/store"
	"github.com/schedulerhq/scheduler/internal/testdb"
)

// drain empties a test signal and returns the sum of its events.
func drain[T int | int64](ch <-chan T) (sum T, n int) {
	for len(ch) > 0 {
		sum += <-ch
		n++
	}
	return sum, n
}

// Any login may NOTIFY the leader's channels. 1000 distinct payloads on scheduler_runs cost
// the queue one read per queueCooldown at most; a queued run still wakes it (the poll is a
// minute away, so only its notification can).
func TestRunsNotificationFloodCostsBoundedReads(t *testing.T) {
	ctx := context.Background()
	db, url := newDB(t)
	n := startNode(t, url, "a", nodeOptions{jobs: []config.Job{manualOnly(t, "tick", time.Minute)}, pollInterval: time.Minute})
	awaitSignal(t, &n.en.testSignals.leading, "leading")
	attacker, err := pgx.Connect(ctx, testdb.LoginURL(t, url))
	require.NoError(t, err)
	defer attacker.Close(ctx)

	drain(n.en.testSignals.queuePass.C())
	flood := time.Now()
	_, err = attacker.Exec(ctx, `SELECT pg_notify('scheduler_runs', g::text) FROM generate_series(1, 1000) AS g`)
	require.NoError(t, err)
	run, _, err := db.QueueManualRun(ctx, "tick", nil, []byte(`{}`))
	require.NoError(t, err)
	awaitStatus(t, db, run.ID, store.StatusSucceeded)
	elapsed := time.Since(flood)
	_, passes := drain(n.en.testSignals.queuePass.C())
	assert.LessOrEqual(t, passes, int(elapsed/queueCooldown)+2, "one pass per cooldown at most")
	t.Logf("1000 notifications and a queued run in %s cost %d passes over the queue", elapsed, passes)
}

// 1000 distinct job names on scheduler_definitions cost the definition watch at most
// definitionsBurstNames named reads and then one comparison of every version per cooldown,
// where each name used to cost a read; a real change is still followed at once.
func TestDefinitionsNotificationFloodCostsBoundedReads(t *testing.T) {
	ctx := context.Background()
	db, url := newDB(t)
	n := startNode(t, url, "a", nodeOptions{runtime: runtimeFor(t), pollInterval: time.Minute})
	awaitSignal(t, &n.en.testSignals.leading, "leading")
	attacker, err := pgx.Connect(ctx, testdb.LoginURL(t, url))
	require.NoError(t, err)
	defer attacker.Close(ctx)
	// The subscription's first resync is a comparison of every version: once it is read,
	// the watch listens.
	require.Equal(t, 1, awaitSignal(t, &n.en.testSignals.definitionsRead, "the first comparison"))

	flood := time.Now()
	_, err = attacker.Exec(ctx, `SELECT pg_notify('scheduler_definitions', 'job-' || g) FROM generate_series(1, 1000) AS g`)
	require.NoError(t, err)
	createDefinition(t, db, `{"name": "hook", "schedule": "0 0 1 1 *", "http": {"url": "http://127.0.0.1:9/"}}`)
	// Notifications arrive in commit order: once hook is loaded, the flood was read.
	assert.Equal(t, "hook@1", awaitSignal(t, &n.en.testSignals.definitionLoaded, "hook loaded"))
	elapsed := time.Since(flood)
	reads, passes := drain(n.en.testSignals.definitionsRead.C())
	bursts := int(elapsed/definitionsCooldown) + 2
	assert.LessOrEqual(t, passes, bursts, "one reload per cooldown at most")
	assert.LessOrEqual(t, reads, definitionsBurstNames+bursts, "named reads are capped per burst, the rest is one comparison")
	t.Logf("1000 definition notifications in %s cost %d reads in %d reloads", elapsed, reads, passes)
}
