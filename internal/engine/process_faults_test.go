package engine

import (
	"context"
	"net/url"
	"os"
	"regexp"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schedulerhq/scheduler/internal/seed"
	"github.com/schedulerhq/scheduler/internal/store"
	"github.com/schedulerhq/scheduler/internal/testdb"
)

// processLease is the lease of the processes of these tests (startProcess sets it).
const processLease = 2 * time.Second

// partitionEnv runs the real plan-change job every second over seeded members, so the
// leader is writing (history rows, fenced) when the fault strikes.
var partitionEnv = []string{"SCHEDULER_JOB_PLAN_CHANGE_SCHEDULE=@every 1s"}

// seedDue seeds members 1..n (seed.Members: a tenth of them due for a plan change).
func seedDue(t *testing.T, db *testdb.DB, n int) {
	t.Helper()
	_, err := seed.Members(context.Background(), db.Pool, n)
	require.NoError(t, err)
}

// requireFenceHeld checks guarantee 8 with the commit timestamps of the cluster
// (track_commit_timestamp): no row written by a run of an epoch before epoch committed at
// or after since. A job_runs row of an older epoch that the new leader marked abandoned is
// the new leader's write, not the old one's.
func requireFenceHeld(t *testing.T, db *testdb.DB, epoch int64, since time.Time) {
	t.Helper()
	assert.Zero(t, count(t, db, `
		SELECT count(*) FROM member_plan_change_history h JOIN job_runs r ON r.id = h.run_id
		WHERE r.epoch < $1 AND pg_xact_commit_timestamp(h.xmin) >= $2`, epoch, since),
		"history rows of an older epoch committed after the new epoch's since")
	assert.Zero(t, count(t, db, `
		SELECT count(*) FROM job_runs
		WHERE epoch < $1 AND status <> 'abandoned' AND pg_xact_commit_timestamp(xmin) >= $2`, epoch, since),
		"job_runs rows of an older epoch committed after the new epoch's since")
}

// requireSettled checks that no slot has two rows and, once a plan-change run has
// succeeded since, that no member is still due, none was applied twice and no run of an
// older epoch is still running.
func requireSettled(t *testing.T, db *testdb.DB) {
	t.Helper()
	assert.Zero(t, count(t, db, `SELECT count(*) FROM (SELECT 1 FROM job_runs WHERE scheduled_at IS NOT NULL
		GROUP BY job, scheduled_at HAVING count(*) > 1) d`), "a slot ran twice")
	var after time.Time
	require.NoError(t, db.Pool.QueryRow(context.Background(), `SELECT now()`).Scan(&after))
	require.Eventually(t, func() bool {
		return count(t, db, `SELECT count(*) FROM job_runs WHERE job = 'plan-change' AND status = 'succeeded' AND started_at > $1`, after) > 0
	}, 30*time.Second, 50*time.Millisecond, "a plan-change run after the fault")
	assert.Zero(t, count(t, db, `SELECT count(*) FROM members
		WHERE pending_membership_plan_id IS NOT NULL AND pending_membership_start_date <= (now() AT TIME ZONE 'UTC')::date`),
		"a due member is left")
	assert.Zero(t, count(t, db, `SELECT count(*) FROM (SELECT 1 FROM member_plan_change_history
		GROUP BY member_id, effective_date, change_type HAVING count(*) > 1) d`), "a change was applied twice")
	assert.Zero(t, count(t, db, `SELECT count(*) FROM job_runs WHERE status = 'running'
		AND epoch < (SELECT epoch FROM scheduler_leader)`), "a run of an older epoch is still running")
}

var steppedDownLine = regexp.MustCompile(`(?m)^time=(\S+) level=WARN msg="stepped down`)

// steppedDownAt reads, from a process's log, when it last stepped down.
func steppedDownAt(t *testing.T, p *process) time.Time {
	t.Helper()
	b, err := os.ReadFile(p.log)
	require.NoError(t, err)
	m := steppedDownLine.FindAllSubmatch(b, -1)
	require.NotEmpty(t, m, "%s never stepped down", p.id)
	at, err := time.Parse(time.RFC3339Nano, string(m[len(m)-1][1]))
	require.NoError(t, err)
	return at
}

// The silent partition, for real: the leader runs in its own network namespace, joined to
// PostgreSQL by a veth pair, and its link is cut while it writes: no reset, no close,
// packets just vanish. PostgreSQL's keepalives drop its sessions, a follower takes over,
// the partitioned leader stops within its lease, and after healing it rejoins as a
// follower; nothing of the old epoch commits after the new one began.
func TestSilentPartitionInANetworkNamespace(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the scheduler binary")
	}
	t.Parallel()
	ctx := context.Background()
	link := newNetnsLink(t)
	cluster := testdb.NewCluster(t, testdb.ClusterOptions{
		Listen: []string{link.HostAddr}, Trust: []string{link.Subnet}, Conf: []string{"track_commit_timestamp = on"},
	})
	dbURL := cluster.NewDatabase(t, "")
	nsURL, err := url.Parse(dbURL)
	require.NoError(t, err)
	nsURL.Host = link.HostAddr + ":" + cluster.Port()
	db := testdb.Connect(t, dbURL, store.Options{InstanceID: "observer"})
	seedDue(t, db, 20000)

	bin := buildScheduler(t, t.TempDir())
	cut := startProcessIn(t, link.Name, bin, nsURL.String(), "in-netns", partitionEnv...)
	procs := map[string]*process{cut.id: cut}
	first := awaitLeader(t, db, procs, 0)
	follower := startProcessIn(t, "", bin, dbURL, "outside", partitionEnv...)
	procs[follower.id] = follower
	firstClaimOf(t, db, first.Epoch)
	require.Eventually(t, func() bool {
		return count(t, db, `SELECT count(*) FROM scheduler_instances WHERE instance_id = 'outside'`) == 1
	}, 30*time.Second, 20*time.Millisecond, "the follower is up")
	seedDue(t, db, 40000) // more due members: the leader is writing when the link goes

	link.Cut(t)
	cutAt := time.Now()
	second := awaitLeader(t, db, procs, first.Epoch)
	require.Equal(t, "outside", second.InstanceID)
	// The server notices within its keepalives (idle lease/3 rounded up to 1 s, then 2 probes
	// 1 s apart) or tcp_user_timeout (the lease); the rest is the epoch bump's wait, at most
	// the lease, and slack.
	assert.Less(t, second.Since.Sub(cutAt), 3*time.Second+processLease+2*time.Second, "a follower is elected within the lease and the keepalive detection")
	firstClaimOf(t, db, second.Epoch)
	// Its heartbeat's deadline is the lease after its last good heartbeat, before the cut;
	// the margin is scheduling slack on a busy shared machine.
	assert.Less(t, steppedDownAt(t, cut).Sub(cutAt), processLease+time.Second,
		"the partitioned leader stops scheduling within its lease")

	link.Heal(t)
	healedAt := time.Now()
	require.Eventually(t, func() bool {
		return count(t, db, `SELECT count(*) FROM scheduler_instances
			WHERE instance_id = 'in-netns' AND NOT is_leader AND last_seen_at > $1`, healedAt) == 1
	}, 30*time.Second, 50*time.Millisecond, "the healed replica rejoins as a follower")
	row, err := db.Leader(ctx)
	require.NoError(t, err)
	assert.Equal(t, second.Epoch, row.Epoch, "the healed replica does not take leadership back")

	requireFenceHeld(t, db, second.Epoch, second.Since)
	requireSettled(t, db)
}

// PostgreSQL restarts under the replicas, first cleanly (-m fast) then as a crash
// (-m immediate), on a cluster of the test's own: every replica reconnects, exactly one
// leads under a higher epoch, the run the restart interrupted is abandoned and recovered
// once, no slot ran twice and no due member is left.
func TestPostgresRestartMidRun(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the scheduler binary")
	}
	t.Parallel()
	cluster := testdb.NewCluster(t, testdb.ClusterOptions{Conf: []string{"track_commit_timestamp = on"}})
	dbURL := cluster.NewDatabase(t, "")
	db := testdb.Connect(t, dbURL, store.Options{InstanceID: "observer"})
	seedDue(t, db, 20000)

	bin := buildScheduler(t, t.TempDir())
	procs := map[string]*process{}
	for _, id := range []string{"p1", "p2", "p3"} {
		procs[id] = startProcessIn(t, "", bin, dbURL, id, partitionEnv...)
	}
	cur := awaitLeader(t, db, procs, 0)
	firstClaimOf(t, db, cur.Epoch)

	for i, mode := range []string{"fast", "immediate"} {
		seedDue(t, db, 20000*(i+2)) // the leader is writing when the server goes
		cluster.Restart(t, mode)
		next := awaitLeader(t, db, procs, cur.Epoch)
		firstClaimOf(t, db, next.Epoch)
		require.Eventually(t, func() bool {
			return count(t, db, `SELECT count(*) FROM scheduler_instances WHERE last_seen_at > $1`, next.Since) == 3
		}, 30*time.Second, 50*time.Millisecond, "every replica reconnects after -m %s", mode)
		assert.Equal(t, 1, count(t, db, `SELECT count(*) FROM scheduler_instances WHERE is_leader`), "exactly one leads after -m %s", mode)
		requireFenceHeld(t, db, next.Epoch, next.Since)
		cur = next
	}

	requireSettled(t, db)
	t.Logf("runs by status: abandoned %d, missed %d, succeeded %d, recovery %d",
		count(t, db, `SELECT count(*) FROM job_runs WHERE status = 'abandoned'`),
		count(t, db, `SELECT count(*) FROM job_runs WHERE status = 'missed'`),
		count(t, db, `SELECT count(*) FROM job_runs WHERE status = 'succeeded'`),
		count(t, db, `SELECT count(*) FROM job_runs WHERE trigger = 'recovery'`))
	assert.Zero(t, count(t, db, `SELECT count(*) FROM job_runs a WHERE status = 'abandoned'
		AND (SELECT count(*) FROM job_runs r WHERE r.recovers_run_id = a.id) <> 1
		AND NOT EXISTS (SELECT 1 FROM job_runs q WHERE q.job = a.job AND q.created_at > a.finished_at AND q.status IN ('queued', 'running', 'succeeded'))`),
		"an abandoned run is recovered once")
}
