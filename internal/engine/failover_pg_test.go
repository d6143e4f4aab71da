package engine

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schedulerhq/scheduler/internal/leader"
	"github.com/schedulerhq/scheduler/internal/store"
)

// Issue 29, end to end, with asynchronous replication: the standby falls behind (its
// replication link is cut), a step-down elects a term on the primary alone, the primary is
// killed (-m immediate), the standby promoted and the proxy switched. The lost commits took
// the run-id sequence back with them; to make that certain rather than left to
// PostgreSQL's sequence caching (nextval logs 32 values ahead), the promoted standby's
// sequence is set back to its value at the cut, as a lost primary that issued more than 32
// ids would leave it. The replica recovers by itself and the history stays honest: no slot
// without a row or with two, no slot called under two keys, no called slot recorded missed,
// no run id of the lost history issued again, the lost term's identity never passes the new
// fence, and the new epoch number is above every epoch the lost primary issued.
func TestAsyncFailoverKeepsHistoryHonest(t *testing.T) {
	f := startFailover(t, false)
	f.link.Stop() // the standby falls behind from here
	var cut int64
	f.onPrimary(t, func(conn *pgx.Conn) {
		require.NoError(t, conn.QueryRow(context.Background(), `SELECT last_value FROM job_runs_id_seq`).Scan(&cut))
	})
	f.rec.await(t, len(f.rec.calls())+2)
	// A step-down on the primary alone: its new term is lost with it.
	last := f.stepDown(t)
	f.rec.await(t, len(f.rec.calls())+1)

	var lost map[int64]bool
	again := f.failover(t, func(conn *pgx.Conn) {
		ctx := context.Background()
		_, err := conn.Exec(ctx, `SELECT setval('job_runs_id_seq', $1)`, cut)
		require.NoError(t, err)
		lost = f.missing(t, conn)
	})
	require.NotEmpty(t, lost, "the failover lost runs that were called")
	f.checkHistory(t, last, again, lost)
	t.Logf("calls %d, %d run ids lost; last term on the old primary %s, new term %s (%s)",
		len(f.rec.calls()), len(lost), last.Fence(), again.Fence(), again.FailedOver)
}

// The same failover with synchronous replication (synchronous_standby_names on the primary,
// synchronous_commit on), and a step-down just before the kill: every commit the scheduler
// saw is on the standby, so every guarantee holds and nothing is lost. Every run called
// before the kill is on the promoted standby under the slot it was called for, the new term
// follows the last one (its repair finds only the slots that came due while no leader ran),
// no slot has two rows or two keys, and none is recorded missed.
func TestSyncFailoverKeepsEveryGuarantee(t *testing.T) {
	f := startFailover(t, true)
	f.rec.await(t, len(f.rec.calls())+2)
	last := f.stepDown(t)

	var lost map[int64]bool
	again := f.failover(t, func(conn *pgx.Conn) { lost = f.missing(t, conn) })
	assert.Empty(t, lost, "a synchronous standby has every run that was called")
	f.checkHistory(t, last, again, nil)
	var anyMissed int
	require.NoError(t, f.n.db.Pool.QueryRow(context.Background(),
		`SELECT count(*) FROM job_runs WHERE status = 'missed'`).Scan(&anyMissed))
	assert.Zero(t, anyMissed, "no slot is recorded missed")
	t.Logf("calls %d; last term on the old primary %s, new term %s (%s)",
		len(f.rec.calls()), last.Fence(), again.Fence(), again.FailedOver)
}

// pgBin holds the PostgreSQL 15 binaries the failover tests run as the postgres user.
const pgBin = "/usr/lib/postgresql/15/bin"

// failover is a replica on a primary with a streaming standby of the test's own: the
// standby replicates through a proxy (link) that can cut it behind, and the replica's
// DATABASE_URL is a second proxy (front) that the failover switches to the promoted standby.
// A runtime HTTP job "called" runs every 2 s against a callLog in the test process, which a
// failover cannot roll back. (Not every second: a run's calls must start before the job's
// next slot, and a repair run that starts late in a 1 s period on a loaded machine can find
// that moment passed and fail without calling.)
type failoverRig struct {
	pgsh             string
	primary, standby string
	pPort, sPort     int
	link, front      *toxiproxy.Proxy
	n                *node
	rec              *callLog
	first            leader.Term
}

// startFailover starts the two servers (synchronous: the primary waits for the standby on
// every commit), migrates through front, starts the replica and waits for three calls.
func startFailover(t *testing.T, synchronous bool) *failoverRig {
	if os.Getuid() != 0 {
		t.Skip("runs PostgreSQL servers as the postgres user: needs root")
	}
	if _, err := os.Stat(pgBin + "/pg_basebackup"); err != nil {
		t.Skip("PostgreSQL 15 binaries not found in " + pgBin)
	}
	pgsh, err := filepath.Abs("../../scripts/pg.sh")
	require.NoError(t, err)
	// Not t.TempDir: its parent is closed to the postgres user.
	root, err := os.MkdirTemp("", "scheduler-failover-")
	require.NoError(t, err)
	runCmd(t, "chmod", "755", root)
	t.Cleanup(func() { _ = os.RemoveAll(root) })
	f := &failoverRig{pgsh: pgsh, primary: filepath.Join(root, "primary"), standby: filepath.Join(root, "standby"),
		pPort: freePort(t), sPort: freePort(t)}
	runCmd(t, pgsh, "start", f.primary, fmt.Sprint(f.pPort))
	t.Cleanup(func() { _ = exec.Command(pgsh, "stop", f.primary).Run() })
	var linkURL string
	f.link, linkURL = startProxy(t, pgURL(f.pPort))
	lu, _ := url.Parse(linkURL)
	require.NoError(t, os.MkdirAll(f.standby, 0o700))
	runCmd(t, "chown", "postgres:postgres", f.standby)
	asPG(t, pgBin+"/pg_basebackup", "-D", f.standby, "-h", "127.0.0.1", "-p", fmt.Sprint(f.pPort), "-U", "postgres", "-X", "stream")
	appendConf(t, filepath.Join(f.standby, "postgresql.conf"), fmt.Sprintf(
		"port = %d\nunix_socket_directories = '%s'\nprimary_conninfo = 'host=127.0.0.1 port=%s user=postgres application_name=standby'\n",
		f.sPort, f.standby, lu.Port()))
	runCmd(t, "touch", filepath.Join(f.standby, "standby.signal"))
	runCmd(t, "chown", "-R", "postgres:postgres", f.standby)
	asPG(t, pgBin+"/pg_ctl", "-D", f.standby, "-l", filepath.Join(f.standby, "server.log"), "-w", "start")
	t.Cleanup(func() {
		_ = exec.Command("runuser", "-u", "postgres", "--", pgBin+"/pg_ctl", "-D", f.standby, "-m", "immediate", "stop").Run()
	})
	if synchronous {
		// On the primary only, after the base backup: the promoted standby must not wait
		// for a standby of its own.
		f.onPrimary(t, func(conn *pgx.Conn) {
			ctx := context.Background()
			for _, q := range []string{`ALTER SYSTEM SET synchronous_standby_names = 'standby'`,
				`ALTER SYSTEM SET synchronous_commit = 'on'`, `SELECT pg_reload_conf()`} {
				_, err := conn.Exec(ctx, q)
				require.NoError(t, err)
			}
			require.Eventually(t, func() bool {
				var n int
				err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_stat_replication WHERE sync_state = 'sync'`).Scan(&n)
				return err == nil && n == 1
			}, waitTimeout, 10*time.Millisecond, "the standby replicates synchronously")
		})
	}

	var frontURL string
	f.front, frontURL = startProxy(t, pgURL(f.pPort))
	mg, err := store.NewMigrator(frontURL)
	require.NoError(t, err)
	require.NoError(t, mg.Up())
	_ = mg.Close()

	var recURL string
	f.rec, recURL = newCallLog(t)
	f.n = startNode(t, frontURL, "a", nodeOptions{runtime: runtimeFor(t, "127.0.0.1/32")})
	f.first = awaitTerm(t, f.n)
	awaitSignal(t, &f.n.en.testSignals.leading, "the first term")
	createDefinition(t, f.n.db, `{"name": "called", "schedule": "@every 2s", "http": {"url": "`+recURL+`"}}`)
	awaitSignal(t, &f.n.en.testSignals.definitionLoaded, "the job loaded")
	f.rec.await(t, 3)
	return f
}

// stepDown asks the leader to resign and returns the term it is elected again under, on
// the primary.
func (f *failoverRig) stepDown(t *testing.T) leader.Term {
	t.Helper()
	_, ok, err := f.n.db.RequestStepDown(context.Background(), store.ControlRequest{TokenKind: "test", RequestID: "failover-test"})
	require.NoError(t, err)
	require.True(t, ok)
	term := awaitTerm(t, f.n)
	require.Greater(t, term.Epoch, f.first.Epoch)
	return term
}

// failover kills the primary (-m immediate: what it acknowledged and the standby lacks is
// gone), promotes the standby, runs prepare on it before the replica can reach it, switches
// front to it and returns the replica's next term, which must find the failover.
func (f *failoverRig) failover(t *testing.T, prepare func(*pgx.Conn)) leader.Term {
	t.Helper()
	asPG(t, pgBin+"/pg_ctl", "-D", f.primary, "-m", "immediate", "stop")
	asPG(t, pgBin+"/pg_ctl", "-D", f.standby, "-w", "promote")
	f.front.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	conn, err := pgx.Connect(ctx, pgURL(f.sPort))
	require.NoError(t, err)
	prepare(conn)
	require.NoError(t, conn.Close(ctx))
	f.front.Upstream = fmt.Sprintf("127.0.0.1:%d", f.sPort)
	require.NoError(t, f.front.Start())
	again := awaitTerm(t, f.n) // recovered without a restart
	require.NotEmpty(t, again.FailedOver, "the new term sees the failover")
	return again
}

// onPrimary runs fn on a connection of its own to the primary, outside the proxies.
func (f *failoverRig) onPrimary(t *testing.T, fn func(*pgx.Conn)) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	conn, err := pgx.Connect(ctx, pgURL(f.pPort))
	require.NoError(t, err)
	defer conn.Close(ctx)
	fn(conn)
}

// missing is the run ids called so far that conn's database has no row of.
func (f *failoverRig) missing(t *testing.T, conn *pgx.Conn) map[int64]bool {
	t.Helper()
	lost := map[int64]bool{}
	for _, c := range f.rec.calls() {
		var found bool
		require.NoError(t, conn.QueryRow(context.Background(), `SELECT EXISTS (SELECT 1 FROM job_runs WHERE id = $1)`,
			c.runID).Scan(&found))
		if !found {
			lost[c.runID] = true
		}
	}
	return lost
}

// checkHistory asserts what both failovers promise, once the new term (again, after last,
// the last term the old primary began) has repaired the window: lost are run ids the old
// primary issued and the promoted standby lacked.
func (f *failoverRig) checkHistory(t *testing.T, last, again leader.Term, lost map[int64]bool) {
	t.Helper()
	ctx := context.Background()
	db := f.n.db
	assert.NotEqual(t, last.Fence(), again.Fence(), "no term identity is named twice")
	assert.Greater(t, again.Epoch, last.Epoch, "the new term's epoch is above every epoch the old primary issued")
	awaitSignal(t, &f.n.en.testSignals.repaired, "the repair")
	called := f.rec.calls()
	slots := map[time.Time]string{}
	for _, c := range called {
		if key, ok := slots[c.slot]; ok {
			assert.Equal(t, key, c.key, "slot %s is called under one key", c.slot)
		}
		slots[c.slot] = c.key
	}
	var slotList []time.Time
	for s := range slots {
		slotList = append(slotList, s)
	}
	// Every called slot ends with one row, succeeded, or abandoned (a run the kill
	// interrupted, whose claim the standby had) and redone by a recovery run that succeeded.
	done := assert.Eventually(t, func() bool {
		return count(t, db, `SELECT count(*) FROM job_runs r WHERE job = 'called' AND scheduled_at = ANY($1)
			AND (status = 'succeeded' OR status = 'abandoned' AND EXISTS (
				SELECT 1 FROM job_runs q WHERE q.recovers_run_id = r.id AND q.status = 'succeeded'))`,
			slotList) == len(slotList)
	}, waitTimeout, 50*time.Millisecond, "every called slot is recorded succeeded")
	if !done {
		rows, err := db.Pool.Query(ctx, `SELECT s, r.id, r.status, r.trigger, r.error FROM unnest($1::timestamptz[]) AS s
			LEFT JOIN job_runs r ON r.job = 'called' AND r.scheduled_at = s ORDER BY s`, slotList)
		require.NoError(t, err)
		for rows.Next() {
			v, _ := rows.Values()
			t.Logf("slot %v", v)
		}
		t.FailNow()
	}
	assert.Zero(t, count(t, db, `SELECT count(*) FROM job_runs WHERE status IN ('missed', 'skipped') AND scheduled_at = ANY($1)`,
		slotList), "no called slot is recorded missed or skipped")
	assert.Zero(t, count(t, db, `SELECT count(*) FROM (SELECT 1 FROM job_runs WHERE scheduled_at IS NOT NULL
		GROUP BY job, scheduled_at HAVING count(*) > 1) AS twice`), "no slot has two rows")
	byID := map[int64]time.Time{}
	for _, c := range called {
		if slot, ok := byID[c.runID]; ok {
			assert.Equal(t, slot, c.slot, "run id %d was called for two slots", c.runID)
		}
		byID[c.runID] = c.slot
		var slot *time.Time
		// A recovery run does the slot of the run it recovers.
		err := db.Pool.QueryRow(ctx, `SELECT coalesce(r.scheduled_at, a.scheduled_at)
			FROM job_runs r LEFT JOIN job_runs a ON a.id = r.recovers_run_id WHERE r.id = $1`, c.runID).Scan(&slot)
		switch {
		case lost[c.runID]:
			assert.ErrorIs(t, err, pgx.ErrNoRows, "run id %d of the lost history is issued again, for %v", c.runID, slot)
		case err == nil:
			assert.True(t, slot != nil && slot.Equal(c.slot), "run id %d was called for %s, now names %v", c.runID, c.slot, slot)
		default:
			assert.ErrorIs(t, err, pgx.ErrNoRows)
		}
	}
	err := db.Fenced(ctx, last.Fence(), func(*store.Tx) error { return nil })
	assert.ErrorIs(t, err, store.ErrNotLeader, "a write of the old primary's last term does not pass the new fence")
}

// callLog is an HTTP target that logs every call as a receiver would: the key, the run id
// and the slot from the scheduler's headers.
type callLog struct {
	mu  sync.Mutex
	all []call
}

type call struct {
	key   string
	runID int64
	slot  time.Time
}

func newCallLog(t *testing.T) (*callLog, string) {
	r := &callLog{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		id, err := strconv.ParseInt(req.Header.Get("X-Scheduler-Run-Id"), 10, 64)
		slot, serr := time.Parse(time.RFC3339Nano, req.Header.Get("X-Scheduler-Scheduled-At"))
		if err != nil || serr != nil {
			http.Error(w, "no run id or slot", http.StatusBadRequest)
			return
		}
		r.mu.Lock()
		r.all = append(r.all, call{key: req.Header.Get("Idempotency-Key"), runID: id, slot: slot.UTC()})
		r.mu.Unlock()
	}))
	t.Cleanup(srv.Close)
	return r, srv.URL
}

func (r *callLog) calls() []call {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]call(nil), r.all...)
}

func (r *callLog) await(t *testing.T, n int) {
	t.Helper()
	require.Eventually(t, func() bool { return len(r.calls()) >= n }, waitTimeout, 10*time.Millisecond, "%d calls", n)
}

func freePort(t *testing.T) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func pgURL(port int) string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", port)
}

func runCmd(t *testing.T, name string, args ...string) {
	t.Helper()
	out, err := exec.Command(name, args...).CombinedOutput()
	require.NoError(t, err, "%s %v: %s", name, args, out)
}

func asPG(t *testing.T, args ...string) {
	t.Helper()
	runCmd(t, "runuser", append([]string{"-u", "postgres", "--"}, args...)...)
}

func appendConf(t *testing.T, path, lines string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	require.NoError(t, err)
	_, err = f.WriteString(lines)
	require.NoError(t, err)
	require.NoError(t, f.Close())
}
