package api

import (
	"context"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schedulerhq/scheduler/internal/config"
	"github.com/schedulerhq/scheduler/internal/store"
)

func TestLeader(t *testing.T) {
	t.Parallel()
	a := newTestAPI(t)
	res := a.do("GET", "/v1/leader", "", nil)
	require.Equal(t, http.StatusServiceUnavailable, res.Status, "never elected")
	assert.Equal(t, "no-leader", res.problemType(t))

	a.exec(`UPDATE scheduler_leader SET epoch = 3, instance_id = 'other', since = '2025-01-01T00:00:00Z',
		term_id = '6f1c2a52-8b6e-4d51-9f0e-3d2b7c1a4e90'`)
	res = a.do("GET", "/v1/leader", "", nil)
	require.Equal(t, http.StatusOK, res.Status)
	assert.Equal(t, map[string]any{"instance_id": "other", "epoch": float64(3), "since": "2025-01-01T00:00:00Z",
		"term_id": "6f1c2a52-8b6e-4d51-9f0e-3d2b7c1a4e90", "is_self": false}, res.JSON(t))

	a.exec(`UPDATE scheduler_leader SET epoch = 4, instance_id = $1, since = now()`, testInstance)
	res = a.do("GET", "/v1/leader", "", nil)
	require.Equal(t, http.StatusOK, res.Status)
	assert.Equal(t, true, res.JSON(t)["is_self"])
	assert.Equal(t, float64(4), res.JSON(t)["epoch"])
}

// TestInstances: the leader badge is the leader row's while its lock is held, whatever the
// replicas last reported: after a leader crash both the dead one and the new one report
// is_leader until the dead one's row goes stale, and the console showed two leaders.
func TestInstances(t *testing.T) {
	t.Parallel()
	a := newTestAPI(t)
	ctx := t.Context()
	res := a.do("GET", "/v1/instances", "", nil)
	require.Equal(t, http.StatusOK, res.Status)
	assert.Empty(t, res.JSON(t)["instances"])

	a.exec(`INSERT INTO scheduler_instances (instance_id, host, version, http_addr, started_at, last_seen_at, is_leader)
		VALUES ($1, 'h1', 'v1', '127.0.0.1:8080', now(), now(), true), ('b-crashed', 'h2', 'v1', '', now(), now(), true)`, testInstance)
	a.exec(`UPDATE scheduler_leader SET epoch = 2, instance_id = $1, since = now()`, testInstance)
	leaders := func() []any {
		res := a.do("GET", "/v1/instances", "", nil)
		require.Equal(t, http.StatusOK, res.Status)
		var out []any
		for _, in := range res.JSON(t)["instances"].([]any) {
			if in.(map[string]any)["is_leader"] == true {
				out = append(out, in.(map[string]any)["instance_id"])
			}
		}
		return out
	}
	assert.Empty(t, leaders(), "no replica holds the leader lock: none leads")

	holder, err := a.db.OpenLockSession(ctx)
	require.NoError(t, err)
	defer holder.Close()
	require.NoError(t, holder.Lock(ctx))
	assert.Equal(t, []any{testInstance}, leaders(), "the elected one alone, though the crashed one still says it leads")

	res = a.do("GET", "/v1/instances", "", nil)
	list := res.JSON(t)["instances"].([]any)
	require.Len(t, list, 2)
	assert.Equal(t, true, list[0].(map[string]any)["is_self"])
	assert.Equal(t, false, list[1].(map[string]any)["is_self"])
}

func TestLocksShowHoldersWaitersAndKnownKeys(t *testing.T) {
	t.Parallel()
	a := newTestAPI(t)
	ctx := t.Context()

	// A scheduler session holds the leader lock, as the engine's elector does.
	holder, err := a.db.OpenLockSession(ctx)
	require.NoError(t, err)
	defer holder.Close()
	require.NoError(t, holder.Lock(ctx))
	var leaderKey int64
	require.NoError(t, a.db.Pool.QueryRow(ctx, `SELECT hashtextextended('scheduler-leader', 0)`).Scan(&leaderKey))
	// And an entity lock in an open transaction, as a job does.
	tx, err := a.db.Pool.Begin(ctx)
	require.NoError(t, err)
	defer tx.Rollback(context.Background())
	var entityKey int64
	require.NoError(t, tx.QueryRow(ctx, `SELECT hashtextextended('plan-change:42', 0)`).Scan(&entityKey))
	_, err = tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, entityKey)
	require.NoError(t, err)

	// A follower waits for the leader lock.
	follower, err := store.Open(ctx, a.db.Pool.Config().ConnString(), store.Options{InstanceID: "follower-2", LeaseTimeout: config.LeaseTimeoutDefault})
	require.NoError(t, err)
	defer follower.Close()
	waitCtx, stopWaiting := context.WithCancel(ctx)
	waiting := make(chan error, 1)
	session, err := follower.OpenLockSession(ctx)
	require.NoError(t, err)
	defer session.Close()
	go func() { waiting <- session.Lock(waitCtx) }()
	defer func() { stopWaiting(); <-waiting }()
	require.Eventually(t, func() bool {
		return a.count(`SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted`) == 1
	}, 10*time.Second, 10*time.Millisecond)

	// A transaction holds the scheduler's row lock on active runs, as a claim does, and a
	// manual trigger waits for it.
	claim, err := a.db.Pool.Begin(ctx)
	require.NoError(t, err)
	defer claim.Rollback(context.Background())
	_, err = claim.Exec(ctx, `SELECT FROM scheduler_locks WHERE name = 'scheduler:active_runs' FOR UPDATE`)
	require.NoError(t, err)
	queued := make(chan error, 1)
	go func() {
		_, _, err := a.db.QueueManualRun(ctx, "plan-change", nil, []byte(`{}`))
		queued <- err
	}()
	require.Eventually(t, func() bool {
		return a.count(`SELECT count(*) FROM pg_locks WHERE locktype = 'transactionid' AND NOT granted`) == 1
	}, 10*time.Second, 10*time.Millisecond)

	res := a.do("GET", "/v1/locks", "", nil)
	require.Equal(t, http.StatusOK, res.Status)
	require.NoError(t, claim.Rollback(ctx))
	require.NoError(t, <-queued)
	locks := res.JSON(t)["locks"].([]any)
	require.Len(t, locks, 5, "body: %s", res.Body)
	byKey := map[string][]map[string]any{}
	var rows []map[string]any
	for _, l := range locks {
		m := l.(map[string]any)
		if m["kind"] == "row" {
			rows = append(rows, m)
			continue
		}
		assert.Equal(t, "advisory", m["kind"])
		byKey[m["key"].(string)] = append(byKey[m["key"].(string)], m)
	}

	require.Len(t, rows, 2, "the row lock's holder and its waiter")
	rowHeld, rowWait := rows[0], rows[1]
	for _, r := range rows {
		assert.Equal(t, "scheduler:active_runs", r["name"])
		assert.NotEmpty(t, r["meaning"])
		assert.Equal(t, "FOR UPDATE", r["mode"])
		assert.Nil(t, r["key"], "a row lock has no key")
		assert.Nil(t, r["objsubid"])
		assert.NotNil(t, r["since"])
	}
	assert.Equal(t, true, rowHeld["granted"], "holders come first")
	assert.Equal(t, false, rowWait["granted"])
	assert.Equal(t, testInstance, rowWait["instance_id"], "the trigger waits on the replica's pool")

	leader := byKey[strconv.FormatInt(leaderKey, 10)]
	require.Len(t, leader, 2)
	held, wait := leader[0], leader[1]
	assert.Equal(t, true, held["granted"], "holders come first")
	assert.Equal(t, "scheduler-leader", held["name"])
	assert.NotEmpty(t, held["meaning"])
	assert.Equal(t, testInstance, held["instance_id"])
	assert.Equal(t, "scheduler:"+testInstance, held["application_name"])
	assert.Equal(t, "ExclusiveLock", held["mode"])
	assert.Equal(t, float64(1), held["objsubid"])
	assert.Equal(t, float64(uint32(uint64(leaderKey)>>32)), held["classid"])
	assert.Equal(t, float64(uint32(leaderKey)), held["objid"])
	assert.NotNil(t, held["since"])
	assert.GreaterOrEqual(t, held["age_ms"], float64(0))
	assert.Equal(t, false, wait["granted"])
	assert.Equal(t, "follower-2", wait["instance_id"])
	assert.NotNil(t, wait["since"], "when the wait began")

	entity := byKey[strconv.FormatInt(entityKey, 10)]
	require.Len(t, entity, 1)
	assert.Nil(t, entity[0]["name"], "per-entity keys cannot be named")
	assert.Equal(t, true, entity[0]["granted"])
}
